# AX_BRG_PTHREAD: make -pthread part of CFLAGS and LIBS (threads are required).
AC_DEFUN([AX_BRG_PTHREAD], [
  brg_save_CFLAGS=$CFLAGS
  CFLAGS="$CFLAGS -pthread"
  AC_MSG_CHECKING([whether $CC accepts -pthread])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <pthread.h>]], [[pthread_t t; pthread_create(&t, 0, 0, 0);]])],
    [AC_MSG_RESULT([yes]); PTHREAD_CFLAGS=-pthread; PTHREAD_LIBS=-pthread],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([brigade needs POSIX threads])])
  CFLAGS=$brg_save_CFLAGS
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SUBST([PTHREAD_LIBS])
])

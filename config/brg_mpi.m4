# BRG_CHECK_MPI: Open MPI, to run one pipeline across processes and nodes
# (issue: several processes). Optional: without it (--without-mpi, or no
# libopenmpi-dev) brigade builds and runs in one process, and a run
# launched by mpirun stops with a message saying so. MPI_CFLAGS and
# MPI_LIBS come from pkg-config (ompi-c), `mpicc --showme`, or are given;
# the header is compiled and a call linked with them either way. MPIRUN is
# the launcher the tests use (empty: those tests skip).
AC_DEFUN([BRG_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--without-mpi], [build without MPI (one process only)])],
    [], [with_mpi=check])
  brg_have_mpi=no
  brg_mpi_summary="no (one process only)"
  AS_IF([test "x$with_mpi" != xno], [
    AS_IF([test -z "$MPI_LIBS"], [
      PKG_CHECK_MODULES([MPI], [ompi-c], [],
        [AS_IF([mpicc --showme:link >/dev/null 2>&1],
               [MPI_CFLAGS=`mpicc --showme:compile`; MPI_LIBS=`mpicc --showme:link`])])])
    brg_save_CPPFLAGS=$CPPFLAGS
    brg_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"
    LIBS="$MPI_LIBS $LIBS"
    AC_MSG_CHECKING([whether mpi.h compiles and links with MPI_CFLAGS and MPI_LIBS])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                                    [[int provided; MPI_Init_thread(0, 0, MPI_THREAD_MULTIPLE, &provided); MPI_Finalize();]])],
      [AC_MSG_RESULT([yes]); brg_have_mpi=yes],
      [AC_MSG_RESULT([no])])
    CPPFLAGS=$brg_save_CPPFLAGS
    LIBS=$brg_save_LIBS
    AS_IF([test "x$brg_have_mpi" = xno && test "x$with_mpi" = xyes],
      [AC_MSG_ERROR([--with-mpi: mpi.h does not compile and link with MPI_CFLAGS='$MPI_CFLAGS' MPI_LIBS='$MPI_LIBS'; install libopenmpi-dev])])
  ])
  AS_IF([test "x$brg_have_mpi" = xyes], [
    AC_DEFINE([BRG_HAVE_MPI], [1], [Define to 1 to run pipelines across MPI processes])
    AC_PATH_PROG([MPIRUN], [mpirun], [])
    brg_mpi_summary="yes ($MPI_LIBS; launcher ${MPIRUN:-none})"
  ], [MPI_CFLAGS=""; MPI_LIBS=""; MPIRUN=""])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AC_SUBST([MPIRUN])
  AM_CONDITIONAL([BRG_MPI], [test "x$brg_have_mpi" = xyes])
])

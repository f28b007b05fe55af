# BRG_CHECK_JANSSON: jansson reads and writes JSON model files (required).
# JANSSON_CFLAGS and JANSSON_LIBS may be given instead of pkg-config; the
# header is compiled and a call linked with them either way.
AC_DEFUN([BRG_CHECK_JANSSON], [
  PKG_CHECK_MODULES([JANSSON], [jansson >= 2.10], [],
    [AC_MSG_ERROR([jansson >= 2.10 not found; install libjansson-dev (or set JANSSON_CFLAGS and JANSSON_LIBS)])])
  brg_save_CPPFLAGS=$CPPFLAGS
  brg_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $JANSSON_CFLAGS"
  LIBS="$JANSSON_LIBS $LIBS"
  AC_MSG_CHECKING([whether jansson.h compiles and links with JANSSON_CFLAGS and JANSSON_LIBS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <jansson.h>]], [[json_decref(json_object());]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([jansson.h does not compile and link with JANSSON_CFLAGS='$JANSSON_CFLAGS' JANSSON_LIBS='$JANSSON_LIBS' (config.log has the compiler's words); install libjansson-dev or fix those flags])])
  CPPFLAGS=$brg_save_CPPFLAGS
  LIBS=$brg_save_LIBS
  brg_jansson_summary="yes ($($PKG_CONFIG --modversion jansson 2>/dev/null || echo 'from JANSSON_CFLAGS'))"
])

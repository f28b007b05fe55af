# BRG_CHECK_SPNG: PNG images, for image folders (required).
# SPNG_CFLAGS and SPNG_LIBS come from pkg-config, or are given (as
# bench/gpu/run.sh does for a carried package), else are plain -lspng; the
# header is compiled and a call linked with them either way, so wrong flags
# fail here, named, instead of at make.
AC_DEFUN([BRG_CHECK_SPNG], [
  PKG_CHECK_MODULES([SPNG], [spng], [],
    [SPNG_CFLAGS=""; SPNG_LIBS="-lspng"])
  brg_save_CPPFLAGS=$CPPFLAGS
  brg_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $SPNG_CFLAGS"
  LIBS="$SPNG_LIBS $LIBS"
  AC_MSG_CHECKING([whether spng.h compiles and links with SPNG_CFLAGS and SPNG_LIBS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <spng.h>]], [[spng_ctx *c = spng_ctx_new(0); spng_ctx_free(c);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([spng.h does not compile and link with SPNG_CFLAGS='$SPNG_CFLAGS' SPNG_LIBS='$SPNG_LIBS' (config.log has the compiler's words); install libspng-dev or fix those flags])])
  CPPFLAGS=$brg_save_CPPFLAGS
  LIBS=$brg_save_LIBS
  brg_spng_summary="yes ($SPNG_LIBS)"
])

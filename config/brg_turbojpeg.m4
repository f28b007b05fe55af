# BRG_CHECK_TURBOJPEG: JPEG images (libjpeg-turbo's TurboJPEG API), for image folders (required).
# TURBOJPEG_CFLAGS and TURBOJPEG_LIBS come from pkg-config, or are given (as
# bench/gpu/run.sh does for a carried package), else are plain -lturbojpeg; the
# header is compiled and a call linked with them either way, so wrong flags
# fail here, named, instead of at make.
AC_DEFUN([BRG_CHECK_TURBOJPEG], [
  PKG_CHECK_MODULES([TURBOJPEG], [libturbojpeg], [],
    [TURBOJPEG_CFLAGS=""; TURBOJPEG_LIBS="-lturbojpeg"])
  brg_save_CPPFLAGS=$CPPFLAGS
  brg_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $TURBOJPEG_CFLAGS"
  LIBS="$TURBOJPEG_LIBS $LIBS"
  AC_MSG_CHECKING([whether turbojpeg.h compiles and links with TURBOJPEG_CFLAGS and TURBOJPEG_LIBS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <turbojpeg.h>]], [[tjhandle h = tjInitDecompress(); if (h) tjDestroy(h);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([turbojpeg.h does not compile and link with TURBOJPEG_CFLAGS='$TURBOJPEG_CFLAGS' TURBOJPEG_LIBS='$TURBOJPEG_LIBS' (config.log has the compiler's words); install libturbojpeg0-dev or fix those flags])])
  CPPFLAGS=$brg_save_CPPFLAGS
  LIBS=$brg_save_LIBS
  brg_turbojpeg_summary="yes ($TURBOJPEG_LIBS)"
])

# BRG_CHECK_ZLIB: zlib reads the gzip-compressed IDX data files (required).
# ZLIB_CFLAGS and ZLIB_LIBS come from pkg-config, or are given (as
# bench/gpu/run.sh does for a carried package), else are plain -lz; the
# header is compiled and a call linked with them either way, so wrong flags
# fail here, named, instead of at make.
AC_DEFUN([BRG_CHECK_ZLIB], [
  PKG_CHECK_MODULES([ZLIB], [zlib], [],
    [ZLIB_CFLAGS=""; ZLIB_LIBS="-lz"])
  brg_save_CPPFLAGS=$CPPFLAGS
  brg_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $ZLIB_CFLAGS"
  LIBS="$ZLIB_LIBS $LIBS"
  AC_MSG_CHECKING([whether zlib.h compiles and links with ZLIB_CFLAGS and ZLIB_LIBS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <zlib.h>]], [[gzFile f = gzopen("", "rb"); if (f) gzclose(f);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([zlib.h does not compile and link with ZLIB_CFLAGS='$ZLIB_CFLAGS' ZLIB_LIBS='$ZLIB_LIBS' (config.log has the compiler's words); install zlib1g-dev or fix those flags])])
  CPPFLAGS=$brg_save_CPPFLAGS
  LIBS=$brg_save_LIBS
  brg_zlib_summary="yes ($ZLIB_LIBS)"
])

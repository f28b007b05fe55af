# BRG_CHECK_ZLIB: zlib reads the gzip-compressed IDX data files (required).
AC_DEFUN([BRG_CHECK_ZLIB], [
  PKG_CHECK_MODULES([ZLIB], [zlib], [],
    [brg_save_LIBS=$LIBS
     AC_CHECK_LIB([z], [gzopen], [ZLIB_LIBS=-lz],
       [AC_MSG_ERROR([zlib not found; install zlib1g-dev])])
     LIBS=$brg_save_LIBS])
  brg_zlib_summary="yes"
])

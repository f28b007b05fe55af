# BRG_CHECK_OPENBLAS: OpenBLAS provides sgemm for the CPU backend (required).
# --with-openblas=DIR points at a prefix with include/ and lib/; otherwise
# pkg-config's "openblas" is used, then a plain -lopenblas.
AC_DEFUN([BRG_CHECK_OPENBLAS], [
  AC_ARG_WITH([openblas],
    [AS_HELP_STRING([--with-openblas=DIR], [OpenBLAS prefix (default: pkg-config)])],
    [], [with_openblas=check])
  AS_IF([test "x$with_openblas" = xno],
    [AC_MSG_ERROR([OpenBLAS is required for the CPU backend; install libopenblas-dev])])
  AS_IF([test "x$with_openblas" != xcheck && test "x$with_openblas" != xyes],
    [OPENBLAS_CFLAGS="-I$with_openblas/include"
     OPENBLAS_LIBS="-L$with_openblas/lib -lopenblas"],
    [PKG_CHECK_MODULES([OPENBLAS], [openblas], [],
      [OPENBLAS_CFLAGS=""; OPENBLAS_LIBS="-lopenblas"])])
  brg_save_CPPFLAGS=$CPPFLAGS
  brg_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $OPENBLAS_CFLAGS"
  LIBS="$OPENBLAS_LIBS $LIBS"
  AC_CHECK_HEADER([cblas.h], [],
    [AC_MSG_ERROR([cblas.h from OpenBLAS not found; install libopenblas-dev or use --with-openblas=DIR])])
  AC_MSG_CHECKING([for cblas_sgemm and openblas_get_config in OpenBLAS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cblas.h>]],
      [[float a = 1, b = 1, c = 0; cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
        return openblas_get_config() == 0;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([cannot link OpenBLAS ($OPENBLAS_LIBS); install libopenblas-dev])])
  CPPFLAGS=$brg_save_CPPFLAGS
  LIBS=$brg_save_LIBS
  AC_SUBST([OPENBLAS_CFLAGS])
  AC_SUBST([OPENBLAS_LIBS])
  brg_openblas_summary="yes ($OPENBLAS_LIBS)"
])

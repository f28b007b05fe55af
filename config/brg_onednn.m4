# BRG_CHECK_ONEDNN: oneDNN (Debian libdnnl-dev) for the CPU backend's
# convolutions (issue: CPU speed). Optional: without it the CPU backend
# convolves with im2col + OpenBLAS, as it also can at run time
# (BRG_CPU_CONV=im2col). Debian's build has no pkg-config file: the header
# is compiled and the library linked here, with ONEDNN_CFLAGS and
# ONEDNN_LIBS where given. oneDNN's threads are OpenMP's (libgomp), whose
# count the backend sets per call, so libgomp is linked too.
# --without-onednn turns it off.
AC_DEFUN([BRG_CHECK_ONEDNN], [
  AC_ARG_WITH([onednn],
    [AS_HELP_STRING([--without-onednn], [convolve on the CPU with im2col + OpenBLAS only, without oneDNN])],
    [], [with_onednn=check])
  brg_have_onednn=no
  brg_onednn_why=disabled
  AS_IF([test "x$with_onednn" != xno], [
    AS_IF([test -z "$ONEDNN_LIBS"], [ONEDNN_LIBS="-ldnnl -lgomp"])
    brg_save_CPPFLAGS=$CPPFLAGS
    brg_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $ONEDNN_CFLAGS"
    LIBS="$ONEDNN_LIBS $LIBS"
    AC_MSG_CHECKING([whether oneDNN 2.x (dnnl.h) compiles and links])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <dnnl.h>
#if DNNL_VERSION_MAJOR != 2
#error brigade uses oneDNN 2's C API
#endif
void omp_set_num_threads(int);]],
                                    [[dnnl_engine_t e; if (dnnl_engine_create(&e, dnnl_cpu, 0) == dnnl_success) dnnl_engine_destroy(e); omp_set_num_threads(1);]])],
      [AC_MSG_RESULT([yes]); brg_have_onednn=yes],
      [AC_MSG_RESULT([no]); brg_onednn_why="no oneDNN 2: install libdnnl-dev"])
    CPPFLAGS=$brg_save_CPPFLAGS
    LIBS=$brg_save_LIBS
    AS_IF([test "x$brg_have_onednn" = xno && test "x$with_onednn" = xyes],
      [AC_MSG_ERROR([--with-onednn: $brg_onednn_why])])
  ])
  # The CPU kernels that are not oneDNN's (BatchNorm, pooling, ReLU) split
  # their channels and planes over the same OpenMP threads, so one pool
  # serves the whole step (gemm.c says why two pools cost 1.6x). GCC only:
  # its -fopenmp runtime is the libgomp oneDNN links; clang's is another.
  BRG_OPENMP_CFLAGS=
  AS_IF([test "x$brg_have_onednn" = xyes], [
    AC_MSG_CHECKING([whether $CC compiles OpenMP for libgomp (-fopenmp)])
    brg_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -fopenmp"
    AS_CASE([`$CC --version 2>/dev/null`], [*clang*], [brg_gomp=no], [
      AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <omp.h>]], [[int s = 0;
#pragma omp parallel for reduction(+:s)
for (int i = 0; i < 4; i++) s += i;
return s != 6 && omp_get_max_threads() > 0;]])], [brg_gomp=yes], [brg_gomp=no])])
    CFLAGS=$brg_save_CFLAGS
    AC_MSG_RESULT([$brg_gomp])
    AS_IF([test "x$brg_gomp" = xyes], [BRG_OPENMP_CFLAGS=-fopenmp])
  ])
  AC_SUBST([BRG_OPENMP_CFLAGS])
  AM_CONDITIONAL([BRG_ONEDNN], [test "x$brg_have_onednn" = xyes])
  AS_IF([test "x$brg_have_onednn" = xyes], [
    AC_DEFINE([BRG_HAVE_ONEDNN], [1], [Define to 1 to convolve on the CPU with oneDNN])
    brg_onednn_summary="yes (convolutions; BRG_CPU_CONV=im2col for OpenBLAS)"
  ], [ONEDNN_CFLAGS=""; ONEDNN_LIBS=""; brg_onednn_summary="no ($brg_onednn_why); im2col + OpenBLAS"])
  AC_SUBST([ONEDNN_CFLAGS])
  AC_SUBST([ONEDNN_LIBS])
])

# BRG_CHECK_CUDA: the CUDA toolkit (nvcc, runtime, cuBLAS) and, with it,
# cuDNN and NCCL. All optional: absent ones are reported in the summary;
# one asked for explicitly (--with-X=DIR, --enable-cuda) and not found is an
# error. The toolkit's standard prefix is searched by default.
#
# Defines BRG_HAVE_CUDA, BRG_HAVE_CUDNN, BRG_HAVE_NCCL; substitutes NVCC,
# NVCCFLAGS, CUDA_CPPFLAGS, CUDA_LIBS; conditionals HAVE_CUDA, HAVE_CUDNN,
# HAVE_NCCL.

# _BRG_CUDA_LIBDIR(PREFIX): the first of PREFIX/lib64, PREFIX/lib that exists.
AC_DEFUN([_BRG_CUDA_LIBDIR], [
  brg_libdir=""
  for brg_d in "$1/lib64" "$1/lib" "$1/lib/x86_64-linux-gnu"; do
    AS_IF([test -z "$brg_libdir" && test -d "$brg_d"], [brg_libdir=$brg_d])
  done
])

# _BRG_CUDA_OPTIONAL_LIB(NAME, WITH_VAR, HEADER, LIB, FUNC, DEFINE)
# Look for an add-on library of the toolkit (cuDNN, NCCL) in the prefix given
# by --with-NAME, else in the toolkit's prefix and the system.
AC_DEFUN([_BRG_CUDA_OPTIONAL_LIB], [
  brg_found_$4=no
  brg_$4_cppflags=""
  brg_$4_libs=""
  AS_IF([test "x$brg_have_cuda" = xyes && test "x$$2" != xno], [
    brg_candidates=""
    AS_IF([test "x$$2" != xcheck && test "x$$2" != xyes], [brg_candidates="$$2"],
          [brg_candidates="$brg_cuda_prefix /usr"])
    for brg_p in $brg_candidates; do
      AS_IF([test "x$brg_found_$4" = xyes], [break])
      _BRG_CUDA_LIBDIR([$brg_p])
      brg_save_CPPFLAGS=$CPPFLAGS
      brg_save_LIBS=$LIBS
      brg_try_cpp="-I$brg_p/include $CUDA_CPPFLAGS"
      brg_try_libs="-L$brg_libdir -Wl,-rpath,$brg_libdir -l$4 $CUDA_LIBS"
      CPPFLAGS="$CPPFLAGS $brg_try_cpp"
      LIBS="$brg_try_libs $LIBS"
      AC_MSG_CHECKING([for $1 in $brg_p])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <$3>]], [[(void)$5;]])],
        [AC_MSG_RESULT([yes]); brg_found_$4=yes
         brg_$4_cppflags="-I$brg_p/include"
         brg_$4_libs="-L$brg_libdir -Wl,-rpath,$brg_libdir -l$4"],
        [AC_MSG_RESULT([no])])
      CPPFLAGS=$brg_save_CPPFLAGS
      LIBS=$brg_save_LIBS
      AS_UNSET([brg_save_CPPFLAGS])
    done
    AS_IF([test "x$brg_found_$4" = xno && test "x$$2" != xcheck],
      [AC_MSG_ERROR([$1 was asked for (--with-m4_tolower($1)=$$2) but not found there])])
  ], [
    AS_IF([test "x$$2" != xcheck && test "x$$2" != xno],
      [AC_MSG_ERROR([$1 was asked for but the CUDA toolkit was not found])])
  ])
  AS_IF([test "x$brg_found_$4" = xyes], [
    AC_DEFINE([$6], [1], [Define if $1 is available])
    CUDA_CPPFLAGS="$CUDA_CPPFLAGS $brg_$4_cppflags"
    CUDA_LIBS="$brg_$4_libs $CUDA_LIBS"
  ])
])

AC_DEFUN([BRG_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit prefix (default: search $CUDA_HOME, /usr/local/cuda)])],
    [], [with_cuda=check])
  AC_ARG_ENABLE([cuda],
    [AS_HELP_STRING([--disable-cuda], [build without the CUDA backend])],
    [], [enable_cuda=check])
  AC_ARG_WITH([cudnn],
    [AS_HELP_STRING([--with-cudnn=DIR], [cuDNN prefix (default: the toolkit's, then the system's)])],
    [], [with_cudnn=check])
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl=DIR], [NCCL prefix (default: the toolkit's, then the system's)])],
    [], [with_nccl=check])
  AC_ARG_VAR([NVCC], [the CUDA compiler])
  AC_ARG_VAR([NVCCFLAGS], [flags for the CUDA compiler (default: -O2 and code for sm_80 and sm_90)])
  AC_ARG_VAR([CUDA_HOME], [CUDA toolkit prefix, searched when --with-cuda names none])

  brg_have_cuda=no
  brg_cuda_required=no
  AS_IF([test "x$enable_cuda" = xyes], [brg_cuda_required=yes])
  AS_IF([test "x$with_cuda" != xcheck && test "x$with_cuda" != xno], [brg_cuda_required=yes])
  AS_IF([test "x$with_cuda" = xno], [enable_cuda=no])
  AS_IF([test "x$enable_cuda" = xno && test "x$brg_cuda_required" = xyes],
    [AC_MSG_ERROR([--disable-cuda contradicts --with-cuda=$with_cuda])])

  CUDA_CPPFLAGS=""
  CUDA_LIBS=""
  brg_cuda_prefix=""
  AS_IF([test "x$enable_cuda" != xno], [
    AS_IF([test "x$with_cuda" != xcheck && test "x$with_cuda" != xyes],
      [brg_cuda_candidates="$with_cuda"],
      [brg_cuda_candidates="$CUDA_HOME /usr/local/cuda /opt/cuda /usr"])
    for brg_p in $brg_cuda_candidates; do
      AS_IF([test -n "$brg_cuda_prefix"], [break])
      AS_IF([test -x "$brg_p/bin/nvcc" && test -f "$brg_p/include/cuda_runtime_api.h"],
        [brg_cuda_prefix=$brg_p])
    done
    AS_IF([test -n "$brg_cuda_prefix"], [
      AS_IF([test -z "$NVCC"], [NVCC="$brg_cuda_prefix/bin/nvcc"])
      _BRG_CUDA_LIBDIR([$brg_cuda_prefix])
      brg_cuda_libdir=$brg_libdir
      CUDA_CPPFLAGS="-I$brg_cuda_prefix/include"
      brg_save_CPPFLAGS=$CPPFLAGS
      brg_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
      LIBS="-L$brg_cuda_libdir -lcublas -lcudart $LIBS"
      AC_MSG_CHECKING([for the CUDA runtime and cuBLAS in $brg_cuda_prefix])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime_api.h>
#include <cublas_v2.h>]], [[int n; cublasHandle_t h; (void)cudaGetDeviceCount(&n); (void)cublasCreate(&h);]])],
        [AC_MSG_RESULT([yes]); brg_have_cuda=yes],
        [AC_MSG_RESULT([no])])
      CPPFLAGS=$brg_save_CPPFLAGS
      LIBS=$brg_save_LIBS
    ])
    AS_IF([test "x$brg_have_cuda" = xyes], [
      CUDA_LIBS="-L$brg_cuda_libdir -Wl,-rpath,$brg_cuda_libdir -lcublas -lcudart -lstdc++"
      AS_IF([test -z "$NVCCFLAGS"],
        [NVCCFLAGS="-O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"])
    ], [
      AS_IF([test "x$brg_cuda_required" = xyes],
        [AC_MSG_ERROR([the CUDA toolkit was asked for but no usable nvcc, runtime and cuBLAS were found in: $brg_cuda_candidates])])
    ])
  ])

  _BRG_CUDA_OPTIONAL_LIB([cuDNN], [with_cudnn], [cudnn.h], [cudnn], [cudnnGetVersion()], [BRG_HAVE_CUDNN])
  _BRG_CUDA_OPTIONAL_LIB([NCCL], [with_nccl], [nccl.h], [nccl], [ncclGetVersion((int*)0)], [BRG_HAVE_NCCL])

  AS_IF([test "x$brg_have_cuda" = xyes], [
    AC_DEFINE([BRG_HAVE_CUDA], [1], [Define if the CUDA backend is built])
    brg_cuda_summary="yes ($brg_cuda_prefix, $($NVCC --version | sed -n 's/.*release \([[0-9.]]*\).*/\1/p'))"
    brg_cublas_summary="yes"
  ], [
    AS_IF([test "x$enable_cuda" = xno], [brg_cuda_summary="no (disabled)"],
          [brg_cuda_summary="no (toolkit not found; --with-cuda=DIR to point at one)"])
    brg_cublas_summary="no"
  ])
  AS_IF([test "x$brg_found_cudnn" = xyes], [brg_cudnn_summary="yes"],
        [brg_cudnn_summary="no"])
  AS_IF([test "x$brg_found_nccl" = xyes], [brg_nccl_summary="yes"],
        [brg_nccl_summary="no"])

  AM_CONDITIONAL([HAVE_CUDA], [test "x$brg_have_cuda" = xyes])
  AM_CONDITIONAL([HAVE_CUDNN], [test "x$brg_found_cudnn" = xyes])
  AM_CONDITIONAL([HAVE_NCCL], [test "x$brg_found_nccl" = xyes])
  AC_SUBST([NVCC])
  AC_SUBST([NVCCFLAGS])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LIBS])
])

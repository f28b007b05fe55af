# BRG_CHECK_ONNX: importing ONNX models (issue: import). Needs protobuf-c
# (libprotobuf-c-dev), its compiler protoc-c (protobuf-c-compiler) and the
# onnx.proto that Debian's libonnx-dev installs: the C reader is generated
# from that file at build time (model/import/Makefile.am). Optional: without
# it brigade builds, and `brigade model import` says what to install.
# --with-onnx-proto=FILE names another onnx.proto; --without-onnx turns the
# importer off. The node tests of libonnx-testdata, when installed, are read
# by tests/test_onnx_nodes.c from ONNX_NODE_TESTS.
AC_DEFUN([BRG_CHECK_ONNX], [
  AC_ARG_WITH([onnx],
    [AS_HELP_STRING([--without-onnx], [build without the ONNX importer])],
    [], [with_onnx=check])
  AC_ARG_WITH([onnx-proto],
    [AS_HELP_STRING([--with-onnx-proto=FILE], [onnx.proto to generate the reader from @<:@/usr/include/onnx/onnx.proto@:>@])],
    [brg_onnx_proto=$withval], [brg_onnx_proto=/usr/include/onnx/onnx.proto])
  AC_ARG_WITH([onnx-testdata],
    [AS_HELP_STRING([--with-onnx-testdata=DIR], [ONNX node tests @<:@/usr/share/libonnx-testdata/data/node@:>@])],
    [brg_onnx_tests=$withval], [brg_onnx_tests=/usr/share/libonnx-testdata/data/node])
  AC_ARG_VAR([PROTOC_C], [the protobuf-c compiler])
  brg_have_onnx=no
  brg_onnx_why=""
  AS_IF([test "x$with_onnx" != xno], [
    AC_PATH_PROG([PROTOC_C], [protoc-c], [])
    AS_IF([test -z "$PROTOBUF_C_LIBS"],
      [PKG_CHECK_MODULES([PROTOBUF_C], [libprotobuf-c], [], [PROTOBUF_C_CFLAGS=""; PROTOBUF_C_LIBS="-lprotobuf-c"])])
    brg_save_CPPFLAGS=$CPPFLAGS
    brg_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $PROTOBUF_C_CFLAGS"
    LIBS="$PROTOBUF_C_LIBS $LIBS"
    AC_MSG_CHECKING([whether protobuf-c compiles and links])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <protobuf-c/protobuf-c.h>]], [[(void)protobuf_c_version();]])],
      [AC_MSG_RESULT([yes]); brg_protobuf_c=yes], [AC_MSG_RESULT([no]); brg_protobuf_c=no])
    CPPFLAGS=$brg_save_CPPFLAGS
    LIBS=$brg_save_LIBS
    AS_IF([test -z "$PROTOC_C"], [brg_onnx_why="no protoc-c: install protobuf-c-compiler"],
          [test "x$brg_protobuf_c" != xyes], [brg_onnx_why="protobuf-c does not link: install libprotobuf-c-dev"],
          [test ! -f "$brg_onnx_proto"], [brg_onnx_why="no $brg_onnx_proto: install libonnx-dev"],
          [brg_have_onnx=yes])
    AS_IF([test "x$brg_have_onnx" = xno && test "x$with_onnx" = xyes],
      [AC_MSG_ERROR([--with-onnx: $brg_onnx_why])])
  ], [brg_onnx_why="disabled"])
  AS_IF([test "x$brg_have_onnx" = xyes], [
    AC_DEFINE([BRG_HAVE_ONNX], [1], [Define to 1 to build the ONNX importer])
    brg_onnx_summary="yes ($brg_onnx_proto)"
    AS_IF([test ! -d "$brg_onnx_tests"], [brg_onnx_summary="$brg_onnx_summary; node tests absent (apt-get install libonnx-testdata)"])
  ], [PROTOBUF_C_CFLAGS=""; PROTOBUF_C_LIBS=""; brg_onnx_summary="no ($brg_onnx_why)"])
  ONNX_PROTO=$brg_onnx_proto
  ONNX_NODE_TESTS=$brg_onnx_tests
  AC_SUBST([ONNX_PROTO])
  AC_SUBST([ONNX_NODE_TESTS])
  AC_SUBST([PROTOBUF_C_CFLAGS])
  AC_SUBST([PROTOBUF_C_LIBS])
  AM_CONDITIONAL([BRG_ONNX], [test "x$brg_have_onnx" = xyes])
])

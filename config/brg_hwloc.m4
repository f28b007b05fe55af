# BRG_CHECK_HWLOC: hwloc describes cores, NUMA nodes and PCI devices (required).
# HWLOC_CFLAGS and HWLOC_LIBS may be given instead of pkg-config. Either
# way the header is compiled and a call linked with them here, so flags
# that pass pkg-config but miss a folder (Debian keeps hwloc's
# autogen/config.h under the multiarch include folder) fail now, naming the
# flags, instead of at make.
AC_DEFUN([BRG_CHECK_HWLOC], [
  PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [],
    [AC_MSG_ERROR([hwloc >= 2.0 not found; install libhwloc-dev (or set HWLOC_CFLAGS and HWLOC_LIBS)])])
  brg_save_CPPFLAGS=$CPPFLAGS
  brg_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $HWLOC_CFLAGS"
  LIBS="$HWLOC_LIBS $LIBS"
  AC_MSG_CHECKING([whether hwloc.h compiles and links with HWLOC_CFLAGS and HWLOC_LIBS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hwloc.h>]],
                                  [[hwloc_topology_t t; if (hwloc_topology_init(&t) == 0) hwloc_topology_destroy(t);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     brg_multiarch=`$CC -print-multiarch 2>/dev/null`
     AS_IF([test -z "$brg_multiarch"], [brg_multiarch=x86_64-linux-gnu])
     AC_MSG_ERROR([hwloc.h does not compile and link with HWLOC_CFLAGS='$HWLOC_CFLAGS' HWLOC_LIBS='$HWLOC_LIBS' (config.log has the compiler's words); install libhwloc-dev, or set HWLOC_CFLAGS to both include folders of an unpacked package (e.g. -IROOT/usr/include -IROOT/usr/include/$brg_multiarch, where Debian keeps hwloc/autogen/config.h) and HWLOC_LIBS to -LROOT/usr/lib/$brg_multiarch -lhwloc])])
  CPPFLAGS=$brg_save_CPPFLAGS
  LIBS=$brg_save_LIBS
  brg_hwloc_summary="yes ($($PKG_CONFIG --modversion hwloc 2>/dev/null || echo 'from HWLOC_CFLAGS'))"
])

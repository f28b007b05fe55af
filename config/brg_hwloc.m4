# BRG_CHECK_HWLOC: hwloc describes cores, NUMA nodes and PCI devices (required).
AC_DEFUN([BRG_CHECK_HWLOC], [
  PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [],
    [AC_MSG_ERROR([hwloc >= 2.0 not found; install libhwloc-dev])])
  brg_hwloc_summary="yes ($($PKG_CONFIG --modversion hwloc))"
])

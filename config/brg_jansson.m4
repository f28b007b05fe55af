# BRG_CHECK_JANSSON: jansson reads and writes JSON model files (required).
AC_DEFUN([BRG_CHECK_JANSSON], [
  PKG_CHECK_MODULES([JANSSON], [jansson >= 2.10], [],
    [AC_MSG_ERROR([jansson >= 2.10 not found; install libjansson-dev])])
  brg_jansson_summary="yes ($($PKG_CONFIG --modversion jansson))"
])

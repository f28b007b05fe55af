# BRG_CHECK_KERAS_ARCHIVE: reading .keras archives (issue: import): libzip
# for the archive and HDF5 for model.weights.h5 in it (Debian: libzip-dev,
# libhdf5-dev). Optional: without them brigade still reads a Keras model's
# JSON (model.to_json(), with jansson), and a .keras file is refused saying
# what to install. --without-keras-archive turns it off.
AC_DEFUN([BRG_CHECK_KERAS_ARCHIVE], [
  AC_ARG_WITH([keras-archive],
    [AS_HELP_STRING([--without-keras-archive], [do not read .keras archives (libzip, HDF5)])],
    [], [with_keras_archive=check])
  brg_have_keras_archive=no
  brg_keras_why=disabled
  AS_IF([test "x$with_keras_archive" != xno], [
    PKG_CHECK_MODULES([LIBZIP], [libzip], [brg_libzip=yes], [brg_libzip=no])
    PKG_CHECK_MODULES([HDF5], [hdf5], [brg_hdf5=yes], [brg_hdf5=no])
    AS_IF([test "x$brg_hdf5" = xyes], [
      brg_save_CPPFLAGS=$CPPFLAGS
      brg_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $HDF5_CFLAGS"
      LIBS="$HDF5_LIBS $LIBS"
      AC_MSG_CHECKING([whether HDF5 opens file images])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>]],
                                      [[hid_t p = H5Pcreate(H5P_FILE_ACCESS); (void)H5Pset_file_image(p, 0, 0);]])],
        [AC_MSG_RESULT([yes])], [AC_MSG_RESULT([no]); brg_hdf5=no])
      CPPFLAGS=$brg_save_CPPFLAGS
      LIBS=$brg_save_LIBS
    ])
    AS_IF([test "x$brg_libzip" != xyes], [brg_keras_why="no libzip: install libzip-dev"],
          [test "x$brg_hdf5" != xyes], [brg_keras_why="no HDF5: install libhdf5-dev"],
          [brg_have_keras_archive=yes])
    AS_IF([test "x$brg_have_keras_archive" = xno && test "x$with_keras_archive" = xyes],
      [AC_MSG_ERROR([--with-keras-archive: $brg_keras_why])])
  ])
  AS_IF([test "x$brg_have_keras_archive" = xyes], [
    AC_DEFINE([BRG_HAVE_KERAS_ARCHIVE], [1], [Define to 1 to read .keras archives])
    brg_keras_summary="yes (libzip $(pkg-config --modversion libzip 2>/dev/null), HDF5 $(pkg-config --modversion hdf5 2>/dev/null))"
  ], [LIBZIP_CFLAGS=""; LIBZIP_LIBS=""; HDF5_CFLAGS=""; HDF5_LIBS=""; brg_keras_summary="no ($brg_keras_why); Keras JSON is read"])
  AC_SUBST([LIBZIP_CFLAGS])
  AC_SUBST([LIBZIP_LIBS])
  AC_SUBST([HDF5_CFLAGS])
  AC_SUBST([HDF5_LIBS])
])

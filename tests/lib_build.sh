# Sourced by test_sanitizers.sh and test_fuzz.sh: compile the library's
# sources with an instrumenting compiler straight into a folder, instead of
# a nested configure (CI builds in the source tree, where a second VPATH
# configure of the same tree is refused, and under `make distcheck` the
# source tree is read-only). The CUDA backend is left out but for its plain
# C parts: its kernels need nvcc, and without a GPU it never runs.
#
# Needs: $src (the source tree), $build (this build, for config.h), $tmp
# (a scratch folder), $cppflags (the dependencies' -I flags).

# Every room's C files.
lib_sources() {
    ls "$src"/base/*.c "$src"/backends/*.c "$src"/backends/ref/*.c "$src"/backends/cpu/*.c \
        "$src"/backends/planning/*.c "$src"/backends/cuda/device.c "$src"/backends/cuda/settings.c \
        "$src"/backends/cuda/workspace.c \
        "$src"/model/*.c "$src"/model/layers/*.c "$src"/model/zoo/*.c "$src"/train/*.c "$src"/schedule/*.c \
        "$src"/exec/*.c "$src"/plan/*.c "$src"/io/*.c "$src"/data/*.c "$src"/check/*.c \
        "$src"/model/import/import.c "$src"/model/import/formats.c "$src"/model/import/keras.c \
        "$src"/model/import/keras-archive.c
    # The ONNX reader, with the C code this build generated from onnx.proto.
    if lib_onnx; then
        ls "$src"/model/import/onnx.c "$src"/model/import/onnx-tensor.c "$build"/model/import/onnx.pb-c.c
    fi
}

# Whether this build has the ONNX importer.
lib_onnx() {
    grep -q '^#define BRG_HAVE_ONNX 1' "$build/config.h" && test -f "$build/model/import/onnx.pb-c.c"
}

# config.h of this build without the CUDA backend, in $tmp.
lib_config() {
    cat >"$tmp/config.h" <<CONF
#include "$build/config.h"
#undef BRG_HAVE_CUDA
#undef BRG_HAVE_CUDNN
#undef BRG_HAVE_NCCL
CONF
}

# The include flags for the library's and the tests' sources.
lib_includes() {
    echo "-I$tmp -I$src/include -I$src -I$build -DHAVE_CONFIG_H $cppflags"
}

# lib_compile DIR CC FLAGS: every source into DIR/*.o, two compilers at a
# time.
lib_compile() {
    mkdir -p "$1" || return 1
    LIB_CC=$2
    LIB_FLAGS="$3 $(lib_includes) -DBRG_BUILDING_LIBRARY"
    export LIB_CC LIB_FLAGS
    # shellcheck disable=SC2016
    lib_sources | xargs -P 2 -I '{}' sh -c \
        'exec $LIB_CC $LIB_FLAGS -c "$2" -o "$1/$(echo "$2" | tr / _).o"' sh "$1" '{}'
}

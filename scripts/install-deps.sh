#!/bin/sh
# Install what brigade needs to build and test, from Debian packages.
# Idempotent: packages already present are left alone. Run as root.
# The CUDA toolkit is not a Debian package here; configure uses it when it
# finds one (see README.md).
set -eu
# clang and its runtimes: the readers' fuzz test (tests/test_fuzz.sh).
# Open MPI: pipelines across processes (tests/test_mpi.sh).
# protobuf-c and onnx.proto: the ONNX importer; libonnx-testdata: its node tests;
# libzip and HDF5: .keras archives. oneDNN: the CPU backend's convolutions.
packages="build-essential autoconf automake libtool pkg-config
libopenblas-dev libjansson-dev zlib1g-dev libturbojpeg0-dev libspng-dev libhwloc-dev openmpi-bin libopenmpi-dev dataset-fashion-mnist clang libclang-rt-dev
protobuf-c-compiler libprotobuf-c-dev libonnx-dev libonnx-testdata libzip-dev libhdf5-dev libdnnl-dev"

missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing:$missing; run this script as root (or with sudo)" >&2
    exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing

#!/bin/sh
# The convolution kernel tests again with every oneDNN convolution cut into
# pieces of one image (BRG_ONEDNN_PIECE_BYTES=1): the pieces of a batch,
# the shorter last piece and the weight gradients added up piece by piece
# (plain and accumulating) stay under the reference and finite-difference
# checks. By default only large images are cut, which the cases are not.
set -u
if ! grep -q '^#define BRG_HAVE_ONEDNN 1' "${BRG_BUILDDIR:-..}/config.h" 2>/dev/null; then
    echo "SKIP: built without oneDNN, which alone cuts batches into pieces"
    exit 77
fi
BRG_ONEDNN_PIECE_BYTES=1 BRG_CPU_CONV=onednn ./test_kernels_conv

#!/bin/sh
# The convolution kernel tests again with batches cut into pieces.
# - Small output planes (conv2d-taps.c) in chunks of images
#   (BRG_CPU_TAPS_BYTES): of one image each, and of 20000 bytes, which cuts
#   the 23 images of 16 channels on 4x4 into chunks of 3 with a remainder
#   of 2.
# - Every oneDNN convolution in pieces (BRG_ONEDNN_PIECE_BYTES): of one
#   image each, and of 28000 bytes, which cuts the 23 images of 10x10 into
#   pieces of 8, 8 and 7 (a last piece of its own shape, whose step puts
#   the weights in its layout again).
# The pieces of a batch and the weight gradients added up piece by piece
# (plain and accumulating) stay under the reference and finite-difference
# checks. By default only large batches are cut, which the cases are not.
set -u
rc=0
for bytes in 1 20000; do
    echo "small planes in chunks of $bytes bytes:"
    BRG_CPU_TAPS_BYTES=$bytes ./test_kernels_conv || rc=1
done
if ! grep -q '^#define BRG_HAVE_ONEDNN 1' "${BRG_BUILDDIR:-..}/config.h" 2>/dev/null; then
    echo "built without oneDNN, which alone cuts large batches into pieces"
    exit $rc
fi
for bytes in 1 28000; do
    echo "oneDNN pieces of $bytes bytes:"
    BRG_ONEDNN_PIECE_BYTES=$bytes BRG_CPU_CONV=onednn ./test_kernels_conv || rc=1
done
exit $rc

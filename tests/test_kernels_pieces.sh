#!/bin/sh
# The convolution kernel tests again with every oneDNN convolution cut into
# pieces (BRG_ONEDNN_PIECE_BYTES): of one image each, and of 28000 bytes,
# which cuts the 23 images of 10x10 into pieces of 8, 8 and 7 (a last
# piece of its own shape, whose step puts the weights in its layout
# again). The pieces of a batch and the weight gradients added up piece by
# piece (plain and accumulating) stay under the reference and
# finite-difference checks. By default only large images are cut, which
# the cases are not.
set -u
if ! grep -q '^#define BRG_HAVE_ONEDNN 1' "${BRG_BUILDDIR:-..}/config.h" 2>/dev/null; then
    echo "SKIP: built without oneDNN, which alone cuts batches into pieces"
    exit 77
fi
rc=0
for bytes in 1 28000; do
    echo "pieces of $bytes bytes:"
    BRG_ONEDNN_PIECE_BYTES=$bytes BRG_CPU_CONV=onednn ./test_kernels_conv || rc=1
done
exit $rc

#!/bin/sh
# The convolution and linear kernel tests again with BRG_CPU_CONV=im2col:
# where oneDNN is built it convolves (and multiplies) by default, so this
# keeps the im2col + OpenBLAS fallback under the same reference and
# finite-difference checks. Builds without oneDNN run im2col in
# test_kernels_conv already: skipped (77) there.
set -u
if ! grep -q '^#define BRG_HAVE_ONEDNN 1' "${BRG_BUILDDIR:-..}/config.h" 2>/dev/null; then
    echo "SKIP: built without oneDNN; test_kernels_conv covers im2col"
    exit 77
fi
BRG_CPU_CONV=im2col
export BRG_CPU_CONV
rc=0
for t in test_kernels_conv test_kernels_linear; do
    ./$t || rc=1
done
exit $rc

#!/bin/sh
# The C and CUDA sources git tracks keep within 120 characters a line, the
# width the code is written to (docs/architecture.md, "API conventions"). Generated
# files (config.h, the ONNX protobuf-c files) are not tracked and not
# checked. Skipped (77) outside a git checkout, e.g. in a release tarball.
src=${BRG_SRCDIR:-$(cd "${srcdir:-.}/.." && pwd)}
if ! command -v git >/dev/null 2>&1 || ! git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "SKIP: $src is not a git checkout"
    exit 77
fi
files=$(git -C "$src" ls-files '*.c' '*.h' '*.cu' | wc -l)
if [ "$files" -eq 0 ]; then # a tarball unpacked inside some other checkout
    echo "SKIP: git tracks no sources in $src"
    exit 77
fi
long=$(cd "$src" && git ls-files -z '*.c' '*.h' '*.cu' |
    xargs -0 awk 'length > 120 { print FILENAME ":" FNR ": " length " characters" }')
if [ -n "$long" ]; then
    echo "FAIL: lines over 120 characters (wrap them):"
    echo "$long" | sed 's/^/  /'
    exit 1
fi
echo "ok: $files C and CUDA sources, no line over 120 characters"

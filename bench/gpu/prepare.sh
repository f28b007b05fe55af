#!/usr/bin/env bash
# bench/gpu/prepare.sh: make what a GPU run carries, here, where autotools
# and apt work (bench/gpu/README.md, "Running it"): the release tarball of
# the commit the checkout is at, and the Debian packages run.sh unpacks
# where the GPU machine lacks a library. Everything goes into .gpu/ of the
# checkout, which git is told to ignore; then `run` with carry [".gpu"].
#
#   bench/gpu/prepare.sh            from the repository's root
#
# Environment: CUDA_HOME (default /usr/local/cuda), JOBS (default nproc).
set -eu

root=$(git rev-parse --show-toplevel)
cd "$root"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "prepare.sh: the checkout has changes that are not committed; the tarball is made from HEAD" \
        "($(git rev-parse --short HEAD)), so commit them first" >&2
    exit 2
fi
CARRIED_DEBS=$(sed 's/#.*//' bench/gpu/carried-debs.txt | tr -s ' \n' ' ')
[ -n "${CARRIED_DEBS// /}" ] || { echo "prepare.sh: no packages in bench/gpu/carried-debs.txt" >&2; exit 1; }

build=$(mktemp -d "${TMPDIR:-/tmp}/brigade-dist.XXXXXX")
trap 'rm -rf "$build"' EXIT
echo "prepare.sh: making the tarball of $(git rev-parse --short HEAD) in $build" >&2
git clone -q "$root" "$build/src"
(
    cd "$build/src"
    autoreconf -fi >"$build/autoreconf.log" 2>&1 || { tail -20 "$build/autoreconf.log" >&2; exit 1; }
    ./configure CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" >"$build/configure.log" 2>&1 ||
        { tail -20 "$build/configure.log" >&2; exit 1; }
    make -j"${JOBS:-$(nproc)}" dist >"$build/dist.log" 2>&1 || { tail -20 "$build/dist.log" >&2; exit 1; }
)
mkdir -p .gpu/debs
git_dir=$(git rev-parse --git-dir)
mkdir -p "$git_dir/info"
grep -qx '/.gpu/' "$git_dir/info/exclude" 2>/dev/null || echo '/.gpu/' >>"$git_dir/info/exclude"
rm -f .gpu/brigade-*.tar.gz
cp "$build"/src/brigade-*.tar.gz .gpu/
echo "prepare.sh: downloading $(echo $CARRIED_DEBS | wc -w) Debian packages into .gpu/debs" >&2
# shellcheck disable=SC2086
(cd .gpu/debs && rm -f ./*.deb && apt-get download $CARRIED_DEBS >/dev/null) ||
    { echo "prepare.sh: apt-get download failed (run apt-get update first?)" >&2; exit 1; }
ls -l .gpu/brigade-*.tar.gz >&2
echo "prepare.sh: $(ls .gpu/debs | wc -l) packages, $(du -sh .gpu | cut -f1) in .gpu/. Now:" >&2
echo "  run with carry [\".gpu\"], timeout_s 480:" \
    "BRG_BUDGET_S=450 BRG_BENCH_STEPS=10 BRG_BENCH_WARMUP=3 bash bench/gpu/run.sh .gpu/$(basename .gpu/brigade-*.tar.gz)" >&2

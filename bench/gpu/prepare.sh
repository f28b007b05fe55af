#!/usr/bin/env bash
# bench/gpu/prepare.sh: make what a GPU run carries, here, where autotools
# and apt work (bench/gpu/README.md, "Running it"): the release tarball of
# the commit the checkout is at, and the Debian packages run.sh unpacks
# where the GPU machine lacks a library. Everything goes into .gpu/ of the
# checkout, which git is told to ignore; then `run` with carry [".gpu"].
#
#   bench/gpu/prepare.sh [BASE_REV]     from the repository's root
#
# With BASE_REV (a commit, e.g. HEAD~3), also the tarball of that commit in
# .gpu/baseline/: run.sh's BRG_BASELINE, profiled in the same call, so that
# a kernel change is measured against what it replaces.
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

base_rev=${1:-}
if [ -n "$base_rev" ] && ! git rev-parse -q --verify "$base_rev^{commit}" >/dev/null; then
    echo "prepare.sh: $base_rev is not a commit of this repository" >&2
    exit 2
fi
build=$(mktemp -d "${TMPDIR:-/tmp}/brigade-dist.XXXXXX")
trap 'rm -rf "$build"' EXIT

# make_tarball REV DEST: the release tarball of commit REV into folder DEST.
make_tarball() {
    local rev=$1 dest=$2 src logs
    src=$build/src-$(git rev-parse --short "$rev")
    logs=$src-logs # each commit's own logs: the baseline's build does not overwrite the tested one's
    echo "prepare.sh: making the tarball of $(git rev-parse --short "$rev") in $build" >&2
    git clone -q "$root" "$src" && git -C "$src" checkout -q "$(git rev-parse "$rev")" && mkdir -p "$logs" || return 1
    (
        cd "$src"
        autoreconf -fi >"$logs/autoreconf.log" 2>&1 || { tail -20 "$logs/autoreconf.log" >&2; exit 1; }
        ./configure CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" >"$logs/configure.log" 2>&1 ||
            { tail -20 "$logs/configure.log" >&2; exit 1; }
        make -j"${JOBS:-$(nproc)}" dist >"$logs/dist.log" 2>&1 || { tail -20 "$logs/dist.log" >&2; exit 1; }
    ) || return 1
    mkdir -p "$dest" && rm -f "$dest"/brigade-*.tar.gz && cp "$src"/brigade-*.tar.gz "$dest"/
}

git_dir=$(git rev-parse --git-dir)
mkdir -p "$git_dir/info"
grep -qx '/.gpu/' "$git_dir/info/exclude" 2>/dev/null || echo '/.gpu/' >>"$git_dir/info/exclude"
make_tarball HEAD .gpu
rm -rf .gpu/baseline
[ -z "$base_rev" ] || make_tarball "$base_rev" .gpu/baseline
mkdir -p .gpu/debs
echo "prepare.sh: downloading $(echo $CARRIED_DEBS | wc -w) Debian packages into .gpu/debs" >&2
# shellcheck disable=SC2086
(cd .gpu/debs && rm -f ./*.deb && apt-get download $CARRIED_DEBS >/dev/null) ||
    { echo "prepare.sh: apt-get download failed (run apt-get update first?)" >&2; exit 1; }
ls -l .gpu/brigade-*.tar.gz >&2
echo "prepare.sh: $(ls .gpu/debs | wc -l) packages, $(du -sh .gpu | cut -f1) in .gpu/. Now:" >&2
baseline=""
[ -z "$base_rev" ] || baseline="BRG_BASELINE=.gpu/baseline/$(basename .gpu/baseline/brigade-*.tar.gz) "
echo "  run with carry [\".gpu\"], timeout_s 570:" \
    "${baseline}BRG_BUDGET_S=540 BRG_BENCH_STEPS=10 BRG_BENCH_WARMUP=3 bash bench/gpu/run.sh" \
    ".gpu/$(basename .gpu/brigade-*.tar.gz)" >&2

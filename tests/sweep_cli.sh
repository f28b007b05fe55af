#!/bin/sh
# The slow sweep before a release (make check-slow, not make check): random
# but sensible `brigade train` and `brigade bench` command lines on tiny
# models, as a new user would try them. Each must end with 0, 1 or 2 within
# its time, and say something on stderr when it does not succeed: never a
# signal, a hang or a silent failure. The planner's own sweep
# (test_plan_property with many more cases) runs beside it.
#
#   BRIGADE       the brigade program (default ../cli/brigade)
#   SWEEP_RUNS    command lines per command (default 100)
#   SWEEP_SEED    seed of the draws (default 1)
set -u
brigade=${BRIGADE:-../cli/brigade}
runs=${SWEEP_RUNS:-100}
seed=${SWEEP_SEED:-1}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0 total=0

# rand N: a number in 0..N-1 from the seeded stream.
rand() {
    seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
    echo $(( seed / 65536 % $1 ))
}
one_of() {
    shift_by=$(rand $#)
    shift "$shift_by"
    echo "$1"
}

sizes="1MiB 2MiB 4MiB 8MiB 16MiB 64MiB 1GiB"
try() {
    total=$((total + 1))
    timeout 120 "$brigade" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -gt 2 ]; then
        echo "FAIL (exit $rc): brigade $*"
        tail -3 "$tmp/err"
        fails=$((fails + 1))
    elif [ $rc -ne 0 ] && [ ! -s "$tmp/err" ]; then
        echo "FAIL (exit $rc, nothing on stderr): brigade $*"
        fails=$((fails + 1))
    fi
}

i=0
while [ $i -lt "$runs" ]; do
    n=$(( $(rand 4) + 1 ))
    devices="${n}x$(one_of $sizes)"
    batch=$(( $(rand 64) + 1 ))
    mb=$(( $(rand 9) ))
    schedule=$(one_of gpipe 1f1b interleaved zb-h1 auto)
    recompute=$(one_of none all auto)
    width=$(one_of 0.25 0.5 1 2)
    try train fmnist-cnn --data synthetic --devices "$devices" --batch "$batch" --epochs 1 \
        --limit $(( batch * ($(rand 3) + 1) )) --microbatches "$mb" --schedule "$schedule" --recompute "$recompute" \
        --width-mult "$width" --optimizer "$(one_of sgd momentum adam)" --seed "$i"
    try bench fmnist-cnn --devices "$devices" --batch "$batch" --schedules "$(one_of gpipe 1f1b zb-h1 interleaved)" \
        --microbatches "$(( $(rand 8) + 1 ))" $( [ "$(rand 2)" = 1 ] && echo --simulate || echo --steps 2 --warmup 0 )
    i=$((i + 1))
done
echo "$total command lines, $fails failed"
[ $fails -eq 0 ]

#!/bin/sh
# Times on CPU devices (docs/planning.md, "Times on CPU devices"): the
# calibration, measured once and cached; --profile auto; brigade model
# profile writing a profile that plan reads back; their errors. Times
# themselves depend on the machine: the checks are on where they come
# from, on their shape and on what they change, never on their values.
# $BRIGADE is set by the test harness (tests/Makefile.am).
. "${srcdir:-.}/cli_lib.sh"
unset BRG_CPU_CALIBRATION
# A cache of this script's own: the first plan must measure.
XDG_CACHE_HOME=$tmp-cache
export XDG_CACHE_HOME
cache=$XDG_CACHE_HOME/brigade/cpu-speed.json
F="plan fmnist-cnn --devices 2x64MiB --batch 16"

# --- the calibration: measured once, then read from the cache ---
expect 0 "at this CPU's calibrated speed per layer kind (measured now, cached in $cache)" $F
[ -s "$cache" ] || fail "the calibration did not write $cache"
grep -q '"brigade-cpu-speed"' "$cache" || fail "$cache has no format"
grep -q '2 sharing' "$cache" || fail "$cache: the entry is not for 2 devices sharing the cores"
before=$(cksum <"$cache")
expect 0 "at this CPU's calibrated speed per layer kind (cached in $cache)" $F
[ "$(cksum <"$cache")" = "$before" ] || fail "a cached calibration was measured again"
expect 0 "\"times\": \"calibrated\"" $F --json
expect 0 "\"cpu_speed_cache\": \"$cache\"" $F --json
# Another core share is another entry; both stay.
expect 0 "measured now, cached in" plan fmnist-cnn --devices 1x64MiB --batch 16
[ "$(grep -c 'sharing' "$cache")" = 2 ] || fail "$cache does not hold both core shares"
# A calibrated time is a CPU's: a step of fmnist-cnn at batch 16 takes
# milliseconds (10 TFLOP/s would say about 40 microseconds).
expect 0 "predicted: .* samples/s ([0-9.]* ms per step" $F
# A cache that is not JSON is measured over, not trusted or fatal.
echo "not json" >"$cache"
expect 0 "measured now, cached in" $F
grep -q '"brigade-cpu-speed"' "$cache" || fail "a broken cache was not rewritten"
# Without HOME and XDG_CACHE_HOME there is no cache: measured every time.
checks=$((checks + 1))
env -u HOME -u XDG_CACHE_HOME "$BRIGADE" $F >"$out" 2>&1 ||
    fail "a plan without HOME failed: $(cat "$out")"
grep -q "calibrated speed per layer kind (measured now)" "$out" || fail "without HOME: $(grep at "$out")"

# --- what turns it off ---
expect 0 "at an assumed 10 TFLOP/s per device" $F --device-speed 10000
expect 0 "\"times\": \"flops\"" $F --device-speed 10000 --json
checks=$((checks + 1))
BRG_CPU_CALIBRATION=off "$BRIGADE" $F >"$out" 2>&1 && grep -q "at an assumed 10 TFLOP/s" "$out" ||
    fail "BRG_CPU_CALIBRATION=off: $(cat "$out")"

# --- brigade model profile ---
expect 0 "usage: brigade model profile MODEL --batch U" model profile --help
expect 0 "profile   measure each layer" model --help
expect 2 "\-\-batch U (samples per micro-batch) is required" model profile fmnist-cnn
expect 2 "missing MODEL" model profile --batch 4
expect 2 "\-\-share '0'" model profile fmnist-cnn --batch 4 --share 0
expect 2 "\-\-batch 'x'" model profile fmnist-cnn --batch x
expect 2 "neither a zoo model nor a model file" model profile no-such-model --batch 4
expect 1 "cannot write profile '$tmp-no/such/dir/p.json'" model profile fmnist-cnn --batch 4 -o "$tmp-no/such/dir/p.json"
expect 0 "^conv1  *[0-9.]*  *[0-9.]*  *[0-9.]*  *[0-9.]*  *[0-9.]*%" model profile fmnist-cnn --batch 8 -o "$tmp.p.json"
expect 0 "profile written to $tmp.p.json" model profile fmnist-cnn --batch 8 --share 2 -o "$tmp.p.json"
# -o -: the profile on standard output (it wrote a file named -), the
# table on standard error; a folder is refused before the measuring
"$BRIGADE" model profile fmnist-cnn --batch 2 -o - >"$tmp.stdout.json" 2>"$tmp.stderr"
checks=$((checks + 1))
grep -q '"format": "brigade-profile"' "$tmp.stdout.json" && grep -q "^conv1 " "$tmp.stderr" &&
    ! grep -q "^conv1 " "$tmp.stdout.json" && [ ! -e ./- ] ||
    fail "model profile -o -: no profile on standard output, the table not on standard error, or a file named -"
expect 0 "at measured per-layer times from $tmp.stdout.json" plan fmnist-cnn --devices 2x64MiB --batch 8 --profile "$tmp.stdout.json"
# more shares than cores: each is one thread, said (it was taken silently as "1/4096 of the cores")
expect 0 "note: --share 4096 is more than this machine's [0-9]* cores: each share is one thread" model profile \
    fmnist-cnn --batch 2 --share 4096
mkdir -p "$tmp-dir"
expect 2 "-o $tmp-dir is a folder; give a file name" model profile fmnist-cnn --batch 2 -o "$tmp-dir"
grep -q '"micro_batch": 8' "$tmp.p.json" || fail "the profile's micro_batch is not 8"
grep -q '"model": "fmnist-cnn"' "$tmp.p.json" || fail "the profile does not name its model"
# Every layer, the weight part exactly for the layers that have one.
python3 - "$tmp.p.json" <<'EOF' || fail "the written profile is wrong"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "brigade-profile" and p["version"] == 1, p
L = p["layers"]
names = ["conv1.conv", "conv1.bn", "conv1.relu", "conv1.pool", "conv2.conv", "conv2.bn", "conv2.relu",
         "conv2.pool", "fc1", "fc1.relu", "fc1.dropout", "fc2"]
assert list(L) == names, list(L)
for n in names:
    assert L[n]["forward_ms"] > 0, n
    assert ("backward_weight_ms" in L[n]) == (n.endswith("conv") or n in ("fc1", "fc2")), n
    assert L[n].get("backward_weight_ms", 1) > 0, n
# The second convolution does 32x more FLOPs than the first.
assert L["conv2.conv"]["forward_ms"] > L["conv1.conv"]["forward_ms"], L
EOF
expect 0 "at measured per-layer times from $tmp.p.json" $F --profile "$tmp.p.json"

# --- --profile auto ---
expect 0 "at per-layer times measured on this CPU now (--profile auto)" $F --profile auto
expect 0 "\"times\": \"measured\"" $F --profile auto --json
expect 0 "\"profile\": \"auto\"" $F --profile auto --json
expect 0 "predicted / measured makespan: [0-9.]*" bench fmnist-cnn --devices 2x64MiB --batch 16 --schedules gpipe,1f1b \
    --microbatches 2 --steps 1 --warmup 0 --profile auto
expect 0 "calibrated speed per layer kind" bench fmnist-cnn --devices 2x64MiB --batch 16 --schedules gpipe \
    --microbatches 2 --steps 1 --warmup 0
checks=$((checks + 1))
"$BRIGADE" bench fmnist-cnn --devices 2x64MiB --batch 16 --schedules gpipe --microbatches 2 --steps 1 --warmup 0 \
    --json >"$out" 2>"$err" || fail "bench --json: $(cat "$err")"
grep -q '"effective_gflops": null' "$out" || fail "bench reports a FLOP rate for calibrated times"
expect 2 "needs a value" plan fmnist-cnn --devices 2x64MiB --batch 16 --profile
finish

#!/bin/sh
# brigade bench: unit-cost simulation (bubbles equal the closed forms),
# simulation of a model's plans, a short measured run on CPU devices, the
# trace files (valid JSON and well-formed SVG with one row per stage and
# every action once) and every command-line error.
# $BRIGADE is set by the test harness (tests/Makefile.am).
. "${srcdir:-.}/cli_lib.sh"
# The byte counts below are planned with the im2col convolution's workspaces
# (oneDNN's depend on the machine's ISA); test_cli_train.sh and the C tests
# plan and measure with the default.
BRG_CPU_CONV=im2col
export BRG_CPU_CONV

have_python=0
if command -v python3 >/dev/null 2>&1 && python3 -c 'import json, xml.etree.ElementTree' 2>/dev/null; then
    have_python=1
else
    echo "python3 missing: skipping the JSON and XML parsing checks"
fi

# --- help and usage errors ---
expect 0 "usage: brigade bench MODEL" bench --help
expect 0 "brigade bench --simulate --stages 4" bench -h
expect 2 "missing MODEL" bench --devices 2x64MiB --batch 8
expect 2 "unknown schedule 'pipedream'" bench --simulate --stages 4 --schedules 1f1b,pipedream
expect 2 "names '1f1b' twice" bench --simulate --stages 4 --schedules 1f1b,1f1b
expect 2 "comma-separated list" bench --simulate --stages 4 --microbatches 4,,8
expect 2 "\-\-microbatches 3 does not divide --batch 8 into equal micro-batches; the divisors of 8: 1, 2, 4, 8$" \
    bench fmnist-cnn --devices 2x64MiB --batch 8 --microbatches 2,3
expect 2 "none of the default micro-batch counts" bench fmnist-cnn --devices 2x64MiB --batch 6
expect 2 "\-\-stages .*needs --simulate" bench --stages 4
expect 2 "\-\-stages is for unit costs without a model" bench fmnist-cnn --simulate --stages 4 --devices 2x64MiB --batch 8
expect 2 "\-\-batch needs a MODEL" bench --simulate --stages 4 --batch 8
# unit costs have no speeds, steps or model options: each is refused by name (they were ignored)
for o in "--link-speed 1" "--device-speed 50" "--steps 2" "--warmup 0" "--lr 0.1" "--seed 2" "--cuts fine" \
    "--input 1x8x8"; do
    expect 2 "^brigade bench: ${o%% *} needs a MODEL: --simulate --stages P compares the schedules at unit costs" \
        bench --simulate --stages 4 $o
done
# a simulation runs nothing: a measured run's options are refused by name (they were ignored), whatever their
# value (the defaults here: that is given, not left out)
for o in "--steps 3" "--warmup 1" "--lr 0.01" "--seed 1" "--watchdog 300" "--watchdog-setup 60"; do
    expect 2 "^brigade bench: ${o%% *} applies to measured runs, and --simulate runs nothing: drop ${o%% *}, or drop \
--simulate to measure$" bench fmnist-cnn --devices 2x64MiB --batch 8 --simulate $o
done
expect 2 "^brigade bench: --watchdog applies to measured runs" bench --simulate --stages 4 --watchdog 0
expect 2 "^brigade bench: --watchdog-setup '-5' must be a whole number from 0 to 604800$" bench fmnist-cnn \
    --devices 2x64MiB --batch 8 --watchdog-setup -5
expect 2 "^brigade bench: --watchdog-setup 5 needs the watchdog, which --watchdog 0 turns off" bench fmnist-cnn \
    --devices 2x64MiB --batch 8 --watchdog 0 --watchdog-setup 5
expect 2 "missing --devices" bench fmnist-cnn --batch 8
expect 2 "missing --batch" bench fmnist-cnn --devices 2x64MiB
expect 2 "\-\-steps '0' must be a whole number" bench fmnist-cnn --devices 2x64MiB --batch 8 --steps 0
expect 2 "\-\-chunks applies to the interleaved schedule" bench --simulate --stages 4 --schedules 1f1b --chunks 2
expect 2 "unknown option '--bogus'" bench --simulate --stages 4 --bogus
expect 2 "needs a value" bench --simulate --stages
expect 2 "unexpected argument 'vgg16'" bench fmnist-cnn vgg16 --devices 2x64MiB --batch 8
expect 2 "neither a zoo model nor a model file" bench no-such-model --devices 2x64MiB --batch 8
expect 2 "\-\-devices: .*'12XB'" bench fmnist-cnn --devices 12XB --batch 8
# A measured run on CUDA devices where none can run says why: a build without
# CUDA, or no GPU visible (that was blamed on the build too).
cuda_state=$("$BRIGADE" info 2>/dev/null | grep '^  cuda ')
case "$cuda_state" in
*"compiled in"*unavailable*)
    expect 2 "^brigade bench: device 0 is cuda, and this machine has no GPU visible.*use --simulate" \
        bench fmnist-cnn --devices cuda:0:2x64MiB --batch 8 --schedules 1f1b --microbatches 4 ;;
"  cuda   no"*)
    expect 2 "^brigade bench: device 0 is cuda, which this build lacks; use --simulate" \
        bench fmnist-cnn --devices cuda:0:2x64MiB --batch 8 --schedules 1f1b --microbatches 4 ;;
esac
: >"$tmp.file"
expect 2 "\-\-trace '$tmp.file' exists and is not a directory" bench --simulate --stages 2 --trace "$tmp.file"
expect 2 "\-\-trace '$tmp.file/sub': cannot create the directory" bench --simulate --stages 2 --trace "$tmp.file/sub"

# --- unit costs: the closed forms of docs/schedules.md (p = 4, m = 8) ---
expect 0 "analytic" bench --simulate --stages 4 --microbatches 8
expect 0 '"schedule": "gpipe", "chunks": 1, "microbatches": 8, "fits": true, "makespan": 33, "bubble_fraction": 0.2727272' \
    bench --simulate --stages 4 --microbatches 8 --json
expect 0 '"schedule": "1f1b", "chunks": 1, "microbatches": 8, "fits": true, "makespan": 33, "bubble_fraction": 0.2727272' \
    bench --simulate --stages 4 --microbatches 8 --json
expect 0 '"schedule": "interleaved", "chunks": 2, "microbatches": 8, "fits": true, "makespan": 57, "bubble_fraction": 0.157894' \
    bench --simulate --stages 4 --microbatches 8 --json
expect 0 '"schedule": "zb-h1", "chunks": 1, "microbatches": 8, "fits": true, "makespan": 27, "bubble_fraction": 0.11111' \
    bench --simulate --stages 4 --microbatches 8 --json
# the V-shapes (docs/schedules.md's table): ZB-V first; activations 4, 3, 2 against 1F1B's 4
expect 0 '"rank": 1, "schedule": "zb-v", "chunks": 2, "microbatches": 8, "fits": true, "makespan": 51, "bubble_fraction": 0.0588235.*"peak_activations": 4,' \
    bench --simulate --stages 4 --microbatches 8 --json
expect 0 '"schedule": "v-half", "chunks": 2, "microbatches": 8, "fits": true, "makespan": 55, "bubble_fraction": 0.127272.*"peak_activations": 3,' \
    bench --simulate --stages 4 --microbatches 8 --json --schedules v-half
expect 0 '"schedule": "v-min", "chunks": 2, "microbatches": 8, "fits": true, "makespan": 59, "bubble_fraction": 0.186440.*"peak_activations": 2,' \
    bench --simulate --stages 4 --microbatches 8 --json --schedules v-min
expect 0 '"schedule": "1f1b", .*"peak_activations": 4,' bench --simulate --stages 4 --microbatches 8 --json --schedules 1f1b
# fewer micro-batches than stages: 1F1B holds M, as the footer says (it said only 'the number of stages')
expect 0 '"schedule": "1f1b", .*"peak_activations": 2,' bench --simulate --stages 4 --microbatches 2 --json --schedules 1f1b
expect 0 "1F1B's is the number of stages, or M when fewer$" bench --simulate --stages 4 --microbatches 2 --schedules 1f1b
expect 0 '"schedule": "interleaved", "chunks": 3, "microbatches": 4, .*"makespan": 45,' \
    bench --simulate --stages 4 --microbatches 4 --schedules interleaved --chunks 3 --json
# 600 stages: the two-chunk schedules exceed 1024 virtual stages and are rows saying so; the rest rank
BIG="bench --simulate --stages 600 --microbatches 4"
expect 0 "^   -  interleaved (v=2)  .*cannot build: interleaved schedule: 600 devices x 2 chunks = 1200 virtual" $BIG
expect 0 "^   -  v-min  .*cannot build: v-min schedule: 600 devices x 2 chunks" $BIG
expect 0 "^   4  1f1b                      4       1809  " $BIG
expect 0 '"rank": null, "schedule": "zb-v", "chunks": 2, "microbatches": 4, "fits": false, "note": "cannot build: ' \
    $BIG --json
expect 2 "no combination could be built: each row says why" $BIG --schedules zb-v,interleaved
# one stage is singular, in the table and in the timeline's title
expect 0 "^1 stage at unit costs" bench --simulate --stages 1 --schedules 1f1b --microbatches 4 --trace "$tmp-traces0"
grep -q "<title>1 stage: 1f1b, 4 micro-batches" "$tmp-traces0/1f1b-m4.svg" || fail "the timeline's title: $(
    grep -o '<title>[^<]*' "$tmp-traces0/1f1b-m4.svg" | head -1)"
# progress: one line per combination on stderr
expect 0 "bench \[6/6\] zb-h1-m16" bench --simulate --stages 2 --schedules 1f1b,zb-h1 --microbatches 4,8,16

# check_traces DIR STAGES: every *.trace.json parses and has one named track
# per stage and unique actions; every timeline SVG is well-formed, has
# STAGES rows and the same actions as its trace, each once.
check_traces() {
    checks=$((checks + 1))
    [ "$have_python" -eq 1 ] || return 0
    if python3 - "$1" "$2" <<'EOF'
import glob, json, sys, xml.etree.ElementTree as ET
d, stages = sys.argv[1], int(sys.argv[2])
ns = '{http://www.w3.org/2000/svg}'
traces = sorted(glob.glob(d + '/*.trace.json'))
assert traces, 'no traces in ' + d
for t in traces:
    ev = json.load(open(t))['traceEvents']
    names = [e for e in ev if e['ph'] == 'M' and e['name'] == 'thread_name']
    assert len(names) == stages, (t, len(names))
    xs = [(e['tid'], e['name'], e['args']['micro_batch'], e['args']['chunk']) for e in ev if e['ph'] == 'X']
    assert len(xs) == len(set(xs)), t + ': an action appears twice'
    root = ET.parse(t[:-len('.trace.json')] + '.svg').getroot()
    rows = [g for g in root.iter(ns + 'g') if g.get('class') == 'row']
    assert len(rows) == stages, (t, len(rows))
    acts = [(r.get('data-device'), r.get('data-index')) for r in root.iter(ns + 'rect')
            if 'action' in (r.get('class') or '').split()]
    assert len(acts) == len(set(acts)) == len(xs), (t, len(acts), len(xs))
for m in glob.glob(d + '/*-memory.svg'):
    root = ET.parse(m).getroot()
    groups = [g for g in root.iter(ns + 'g') if g.get('class') == 'device']
    assert len(groups) == stages, (m, len(groups))
EOF
    then
        echo "ok: traces in $1"
    else
        fail "traces in $1 are not valid"
    fi
}

expect 0 "traces and timelines in $tmp-traces1" bench --simulate --stages 4 --microbatches 4,8 --trace "$tmp-traces1"
[ "$(ls "$tmp-traces1" | wc -l)" -eq 32 ] || fail "expected 16 traces and 16 timelines in $tmp-traces1: $(ls "$tmp-traces1")"
check_traces "$tmp-traces1" 4

# a trace directory of 490 characters: the files keep their whole names, and the JSON names files that exist
long=$tmp-long
while [ ${#long} -lt 390 ]; do long=$long/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; done
mkdir -p "$long" && long=$long/$(printf '%*s' $((490 - ${#long} - 1)) '' | tr ' ' b)
expect 0 '"chrome": "'"$long"'/interleaved-v2-m4.trace.json", "svg": "'"$long"'/interleaved-v2-m4.svg"' \
    bench --simulate --stages 2 --microbatches 4 --schedules interleaved,1f1b --trace "$long" --json
checks=$((checks + 1))
for f in interleaved-v2-m4.trace.json interleaved-v2-m4.svg 1f1b-m4.trace.json 1f1b-m4.svg; do
    [ -s "$long/$f" ] || fail "--trace with a directory of ${#long} characters did not write $f: $(ls "$long")"
done
# a name that would pass the longest path the system takes: exit 2 naming it, before anything runs
toolong=$tmp-toolong/$(printf '%*s' 4070 '' | tr ' ' c)
expect 2 "\-\-trace: the path '$toolong/1f1b-m4.trace.json' is longer than the system allows" \
    bench --simulate --stages 2 --microbatches 4 --schedules 1f1b --trace "$toolong"
[ -e "$tmp-toolong" ] && fail "--trace with a path too long made $tmp-toolong"

# a trace that would take more than 1 GiB (trace and timeline of one combination): exit 2 before anything
# runs, with the estimate (6,287,360 actions: 1024 x (2 x 1024 computations + 4 x 1023 messages)) and
# how many micro-batches fit; one too large to build at all is its row, not a trace refusal
expect 2 "^brigade bench: --trace: 1f1b-m1024 has 6287360 actions on 1024 stages, about 2.69 GiB of trace and \
timeline, more than the 1 GiB a trace may take: trace fewer micro-batches (at most 380 at 1024 stages) or stages, \
or drop --trace$" bench --simulate --stages 1024 --microbatches 8,1024 --schedules 1f1b,gpipe --trace "$tmp-huge"
checks=$((checks + 1))
[ -z "$(ls "$tmp-huge")" ] || fail "a refused --trace wrote $(ls "$tmp-huge")"
expect 2 "cannot build: zb-v schedule: 1024 devices x 2 chunks" \
    bench --simulate --stages 1024 --microbatches 1024 --schedules zb-v --trace "$tmp-huge" --json

# --- a model, simulated: every schedule planned; interleaved needs more blocks than fmnist-cnn has ---
expect 0 '"mode": "simulated", "model": "fmnist-cnn", "stages": 2' bench fmnist-cnn --devices 2x64MiB --batch 8 --simulate --json
expect 0 "cannot plan" bench fmnist-cnn --devices 4x64MiB --batch 8 --simulate --schedules interleaved,1f1b --microbatches 4
# nothing could be planned: the table gives each row's reason and the exit is 2, as brigade plan's "nothing fits"
expect 2 "1f1b .*nothing fits" bench fmnist-cnn --devices 2x1MiB --batch 8 --simulate --schedules 1f1b --microbatches 4
expect 2 "no combination could be planned: each row says why" \
    bench fmnist-cnn --devices 2x1MiB --batch 8 --simulate --schedules 1f1b --microbatches 4
expect 2 "^   -  interleaved (v=2)  .*cannot plan: model 'fmnist-cnn' has 4 blocks, too few for 4 devices with" \
    bench fmnist-cnn --devices 4x64MiB --batch 8 --simulate --schedules interleaved --microbatches 4
expect 2 '"rank": null, "schedule": "gpipe", .*"note": "nothing fits' \
    bench fmnist-cnn --devices 2x2MiB --batch 64 --schedules 1f1b,gpipe --microbatches 8 --json
NOFIT="bench fmnist-cnn --devices 2x2MiB --batch 64 --schedules 1f1b,gpipe --microbatches 8"
expect 2 "^   -  gpipe  .*nothing fits: no cut of the 4 blocks into 2 stages" $NOFIT
expect 2 "brigade bench: no combination ran: each row says why" $NOFIT
"$BRIGADE" $NOFIT 2>/dev/null | grep -q "^step: " && fail "$NOFIT explains the columns of runs that did not happen"
# a long reason comes out whole (it was cut at 255 characters), in the row, the progress line and the JSON
LONG="bench fmnist-cnn --devices 2x2MiB --batch 64 --schedules zb-v --microbatches 8 --simulate"
expect 2 "^   -  zb-v  .*nothing fits: no cut .*(with several chunks per device it does not try every cut)$" \
    $LONG
expect 2 "^bench \[1/1\] zb-v-m8: skipped: .*it does not try every cut)$" $LONG
expect 2 '"note": "nothing fits: no cut .*it does not try every cut)", "stage_results": \[\]}' $LONG --json
# one combination that ran is enough for exit 0
expect 0 "^   1  1f1b " \
    bench fmnist-cnn --devices 4x64MiB --batch 8 --simulate --schedules interleaved,1f1b --microbatches 4
# a mistake in the options fails every combination alike: said once, exit 2 and no table, as brigade plan does
expect 2 "^brigade bench: --profile auto measures the layers on this machine's CPU, so it plans CPU devices only" \
    bench fmnist-cnn --devices cuda:0:2x64MiB --batch 8 --schedules 1f1b --microbatches 4 --profile auto --simulate
grep -q "cannot plan\|best first" "$out" && fail "--profile auto with GPUs printed a table: $(cat "$out")"
expect 2 "^brigade bench: model 'fmnist-cnn' has 4 blocks, too few for 8 devices" \
    bench fmnist-cnn --devices 8x64MiB --batch 8 --schedules 1f1b --microbatches 4 --simulate
expect 0 "planned peak" bench fmnist-cnn --devices 2x64MiB --batch 8 --simulate --trace "$tmp-traces2"
check_traces "$tmp-traces2" 2
[ -f "$tmp-traces2/1f1b-m4-memory.svg" ] || fail "no memory chart in $tmp-traces2"

# --- a plan whose peak is within its budget but whose buffers fragment the arena: fmnist-cnn, batch 64, 8
# micro-batches on one 10 MiB device (budget 9.50 MiB) peaks at 9.26 MiB and runs only in an arena of
# 10.02 MiB (10508544 bytes). Its row, its stage and its JSON say so, in brigade plan's words; 11 MiB fits ---
FRAG="bench fmnist-cnn --devices 1x10MiB --batch 64 --microbatches 8 --schedules 1f1b"
expect 0 "^   1  1f1b  .*  9.26 MiB     DOES NOT FIT: fragmented, needs an arena of 10.02 MiB$" $FRAG --simulate
expect 0 "^  1f1b-m8  .*     9.26 MiB  of 10.00 MiB    DOES NOT FIT: fragmented, needs an arena of 10.02 MiB$" \
    $FRAG --simulate
expect 0 "bench \[1/1\] 1f1b-m8: .*(DOES NOT FIT: fragmented, needs an arena of 10.02 MiB)$" $FRAG --simulate
expect 0 '"fits": false, .*"peak_planned_bytes": 9705472, "capacity_bytes": 10485760, "fits": false, "arena_bytes": 10508544}' \
    $FRAG --simulate --json
expect 0 '"fits": true, .*"peak_planned_bytes": 9705472, "capacity_bytes": 11534336, "fits": true, "arena_bytes": 0}' \
    bench fmnist-cnn --devices 1x11MiB --batch 64 --microbatches 8 --schedules 1f1b --simulate --json
# measured: nothing runs, and the row gives the planner's reason
expect 2 "^   -  1f1b .*its buffers fragment the arena: it needs an arena of 10.02 MiB" $FRAG
# two 8 MiB devices: stage 0 fragments (9.91 MiB), stage 1 fits and is not marked
FRAG2="bench fmnist-cnn --devices 2x8MiB --batch 64 --microbatches 8 --schedules 1f1b --simulate"
expect 0 "^  1f1b-m8  .*  0  .*     7.35 MiB  of 8.00 MiB     DOES NOT FIT: fragmented, needs an arena of 9.91 MiB$" \
    $FRAG2
expect 0 "^  *1  .*     4.90 MiB  of 8.00 MiB$" $FRAG2

# --- simulated with measured per-layer times (--profile): fc1 takes 40 ms a pass ---
{ echo '{"format": "brigade-profile", "version": 1, "micro_batch": 4, "device": "test", "layers": {'
  for l in conv1.bn conv1.relu conv1.pool conv2.bn conv2.relu conv2.pool fc1.relu fc1.dropout; do
      echo "\"$l\": {\"forward_ms\": 0.1, \"backward_input_ms\": 0.1},"
  done
  for l in conv1.conv conv2.conv; do
      echo "\"$l\": {\"forward_ms\": 0.1, \"backward_input_ms\": 0.1, \"backward_weight_ms\": 0.1},"
  done
  echo '"fc1": {"forward_ms": 40, "backward_input_ms": 40, "backward_weight_ms": 40},'
  echo '"fc2": {"forward_ms": 0.1, "backward_input_ms": 0.1, "backward_weight_ms": 0.1}}}'; } >"$tmp.profile.json"
# 1F1B, 4 micro-batches of 4 on 2 stages: fc1's stage takes 120 ms per micro-batch, at least 480 ms in all
expect 0 '"schedule": "1f1b", "chunks": 1, "microbatches": 4, "fits": true, "makespan": 0\.[4-6]' \
    bench fmnist-cnn --devices 2x64MiB --batch 16 --microbatches 4 --schedules 1f1b --simulate \
    --profile "$tmp.profile.json" --json
sed 's/"fc2".*/}}/' "$tmp.profile.json" | sed 's/"fc1": \(.*\)},$/"fc1": \1}/' >"$tmp.bad.json"
expect 2 "has no times for layer 'fc2'" bench fmnist-cnn --devices 2x64MiB --batch 16 --simulate --profile "$tmp.bad.json"
expect 2 "cannot open profile" bench fmnist-cnn --devices 2x64MiB --batch 16 --simulate --profile "$tmp.none.json"

# --- measured on two CPU devices: peaks measured equal the plan's ---
expect 0 "replayed" bench fmnist-cnn --devices 2x64MiB --batch 8 --microbatches 2,4 --schedules 1f1b,zb-h1 \
    --steps 1 --warmup 0 --trace "$tmp-traces3"
check_traces "$tmp-traces3" 2
# the footer says the speed the predicted column assumed (it said "at --device-speed" when none was given)
ONE="bench fmnist-cnn --devices 2x64MiB --batch 8 --microbatches 4 --schedules 1f1b --steps 1 --warmup 0"
expect 0 "^plan's times (the cost model's FLOPs at 10 TFLOP/s per device, assumed: --device-speed sets it)\.$" $ONE
expect 0 "^plan's times (the cost model's FLOPs at 50 GFLOP/s per device, --device-speed)\.$" $ONE --device-speed 50
# byte columns are as wide as brg_format_bytes' widest, 11 characters (1000.00 KiB), so KiB and MiB line up
# same_column WHAT: WHAT is at one column in every per-stage line of $out
same_column() {
    checks=$((checks + 1))
    cols=$(grep '^  [ a-z0-9-]\{22\} \{1,3\}[0-9]  ' "$out" | awk -v w="$1" '{ print index($0, w) }' | sort -u)
    [ "$(echo "$cols" | wc -l)" -eq 1 ] && [ "$cols" -gt 0 ] || fail "'$1' in columns $(echo $cols) of: $(cat "$out")"
}
KIB="bench fmnist-cnn --devices 2MiB,2MiB,8MiB,1000KiB --batch 4 --microbatches 2 --schedules 1f1b"
expect 0 "^                           3  .*    19.25 KiB / 19.25 KiB    of 1000.00 KiB  .* hidden$" \
    $KIB --steps 1 --warmup 0
same_column " / "
same_column " of "
same_column " hidden"
expect 0 "^                           3  .*    19.25 KiB  of 1000.00 KiB$" $KIB --simulate
same_column " of "
# a run that fails is exit 1, with the combination and the reason
expect 1 "bench 1f1b-m2: .*NaN" bench fmnist-cnn --devices 2x64MiB --batch 8 --microbatches 2 --schedules 1f1b \
    --lr 1e38 --steps 3
"$BRIGADE" bench fmnist-cnn --devices 2x64MiB --batch 8 --microbatches 4 --schedules gpipe,zb-h1 --steps 2 \
    --json >"$tmp.json" 2>"$out"
checks=$((checks + 1))
if [ "$have_python" -eq 1 ]; then
    if python3 - "$tmp.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r['mode'] == 'measured' and r['steps'] == 2, r
assert len(r['results']) == 2
for x in r['results']:
    assert x['samples_per_s'] > 0 and x['measured_makespan'] > 0 and x['replayed_makespan'] > 0, x
    assert x['predicted_makespan'] > 0 and 0 <= x['bubble_fraction'] < 1, x
    # the mean of the two measured steps lies between the shorter and the longer
    lo, hi = x['measured_makespan_min'], x['measured_makespan_max']
    assert 0 < lo <= x['measured_makespan'] * (1 + 1e-12) and x['measured_makespan'] <= hi * (1 + 1e-12), x
    assert lo < hi, x
    # so does the median (of two steps: their mean)
    assert abs(x['measured_makespan_median'] - x['measured_makespan']) <= 1e-12 * hi, x
    for s in x['stage_results']:
        assert s['peak_measured_bytes'] == s['peak_planned_bytes'] > 0, s
        assert 0 <= s['bubble_fraction'] < 1, s
assert r['results'][0]['samples_per_s'] >= r['results'][1]['samples_per_s']
EOF
    then echo "ok: measured JSON"; else fail "measured JSON"; cat "$tmp.json"; fi
fi

finish

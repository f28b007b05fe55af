#!/bin/sh
# brigade train --checkpoint / --resume, and model export --weights:
#   - a run killed with SIGKILL inside a checkpoint write and at random
#     moments, and resumed until it ends, gives the same final weights and
#     optimizer state, byte for byte, as an uninterrupted run, and prints
#     the same losses and accuracies for every epoch;
#   - SIGINT, SIGTERM, SIGHUP and SIGPIPE (the output's reader gone) save a
#     checkpoint, say how to resume and exit 130, 143, 129 and 141; the
#     resumed run ends as the uninterrupted one; SIGINT inside an epoch's
#     evaluation stops it within seconds, saved before the evaluation,
#     and resumes to the same end (brigade eval stops too, exit 130);
#   - a checkpoint folder is one run's: a second run at the same time is
#     refused, naming the first, and so is a fresh run into a folder that
#     holds checkpoints;
#   - a resume onto other devices, schedule and micro-batches goes on;
#   - bad input: no checkpoint, an incomplete newest one (passed over), other
#     settings, a damaged file, an edited manifest, options that do not go
#     together, a run refused after --checkpoint was made (which leaves no
#     folder behind); resuming a finished run does nothing and exits 0 (also one
#     stopped between its last step and its evaluation);
#   - model export --weights (a seed's initial weights, a checkpoint's),
#     train --init-weights, and brigade eval (the last epoch's test line).
# $BRIGADE is set by the test harness (tests/Makefile.am).
. "${srcdir:-.}/cli_lib.sh"

# 2 devices, 1F1B, Adam with dropout-free fmnist-cnn: 24 steps an epoch
run="fmnist-cnn --data synthetic --limit 768 --batch 32 --microbatches 4 --devices 2x64MiB --epochs 3 --seed 3"
# the same for one epoch
one="fmnist-cnn --data synthetic --limit 768 --batch 32 --microbatches 4 --devices 2x64MiB --epochs 1 --seed 3"

# epoch_lines LOG...: the epoch lines without their times (the last one
# printed for each epoch wins, as a resumed run prints it again)
epoch_lines() {
    cat "$@" | grep '^epoch [0-9]*:' | sed 's/, [0-9.]* s (.*$//' | awk '{ line[$2] = $0 } END { for (e in line) print line[e] }' |
        sort
}

# newest DIR: the newest step-* folder in DIR
newest() {
    ls -d "$1"/step-* 2>/dev/null | sort | tail -n 1
}

# wait_until CONDITION: poll the shell condition (evaluated) every 50 ms
# until it holds, for at most 60 s
wait_until() {
    n=0
    while ! eval "$1" && [ $n -lt 1200 ]; do
        sleep 0.05
        n=$((n + 1))
    done
}

# same_state DIR_A DIR_B WHAT: their newest checkpoints hold the same bytes
same_state() {
    checks=$((checks + 1))
    a=$(newest "$1")
    b=$(newest "$2")
    if [ -z "$a" ] || [ -z "$b" ]; then
        fail "$3: no checkpoint in $1 or $2"
        return
    fi
    if [ "$(basename "$a")" != "$(basename "$b")" ] || ! cmp -s "$a/weights.safetensors" "$b/weights.safetensors" ||
        ! cmp -s "$a/optimizer.safetensors" "$b/optimizer.safetensors"; then
        fail "$3: $b differs from the uninterrupted run's $a"
        return
    fi
    echo "ok: $3: $(basename "$b") equals the uninterrupted run's, byte for byte"
}

# --- the uninterrupted run ---
checks=$((checks + 1))
if "$BRIGADE" train $run --checkpoint "$tmp-a" --checkpoint-every 5 >"$tmp.a.log" 2>&1; then
    echo "ok: uninterrupted run"
else
    fail "the uninterrupted run failed"
    sed 's/^/  | /' "$tmp.a.log"
fi
epoch_lines "$tmp.a.log" >"$tmp.a.epochs"
[ "$(wc -l <"$tmp.a.epochs")" -eq 3 ] || fail "the uninterrupted run printed $(wc -l <"$tmp.a.epochs") epoch lines"
[ "$(ls -d "$tmp-a"/step-* | wc -l)" -eq 2 ] || fail "--keep 2 (the default) left $(ls "$tmp-a" | wc -l) checkpoints"

# --- killed with SIGKILL, then resumed to the end ---
# First inside a save: saves are slowed down (BRG_DEBUG_SAVE_DELAY_MS) and
# the kill comes once the save's temporary folder is there.
args="--checkpoint $tmp-b --checkpoint-every 5"
BRG_DEBUG_SAVE_DELAY_MS=3000 "$BRIGADE" train $run $args >"$tmp.b.log" 2>&1 &
pid=$!
wait_until '[ -n "$(ls -d "$tmp-b"/.step-*.tmp 2>/dev/null)" ]'
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
checks=$((checks + 1))
if [ -n "$(ls -d "$tmp-b"/.step-*.tmp 2>/dev/null)" ] && [ -z "$(newest "$tmp-b")" ]; then
    echo "ok: killed inside the first save: $(ls -a "$tmp-b" | tr '\n' ' ')"
else
    fail "no save was caught half done: $(ls -a "$tmp-b" 2>/dev/null | tr '\n' ' ')"
fi
# nothing to resume from yet: start again, this time with --resume refused
expect 1 "holds no complete checkpoint" train $run --resume "$tmp-b"
# Three more kills, each once the run has saved a checkpoint newer than the
# one it started from and a moment drawn from a fixed seed has passed (so
# every kill lands mid-run, at times inside a save, however fast or slow the
# machine is), then a run to the end.
i=0
killed=0
ended=0
while [ $killed -lt 3 ] && [ $i -lt 6 ] && [ $ended -eq 0 ]; do
    delay=$(awk -v s=$i 'BEGIN { srand(s + 11); printf "%.2f", rand() * 0.15 }')
    before=$(newest "$tmp-b")
    BRG_DEBUG_SAVE_DELAY_MS=30 "$BRIGADE" train $run $args >>"$tmp.b.log" 2>&1 &
    pid=$!
    wait_until '[ "$(newest "$tmp-b")" != "$before" ]'
    sleep "$delay"
    kill -9 $pid 2>/dev/null
    wait $pid
    rc=$?
    if [ $rc -eq 137 ]; then
        killed=$((killed + 1))
        echo "  killed a run $delay s after its first new checkpoint: $(ls -a "$tmp-b" | grep step | tr '\n' ' ')"
    elif [ $rc -eq 0 ]; then
        ended=1
    else
        fail "a resumed run exited $rc"
        tail -5 "$tmp.b.log" | sed 's/^/  | /'
        break
    fi
    [ -n "$(newest "$tmp-b")" ] && args="--checkpoint-every 5 --resume $tmp-b"
    i=$((i + 1))
done
checks=$((checks + 1))
if [ $ended -eq 0 ] && "$BRIGADE" train $run $args >>"$tmp.b.log" 2>&1; then ended=1; fi
if [ $ended -eq 1 ] && [ $killed -ge 2 ]; then
    echo "ok: the run ended after $killed kills with SIGKILL and one inside a save"
else
    fail "the run did not end after $killed kills (or fewer than 2 kills landed while it ran)"
    tail -20 "$tmp.b.log" | sed 's/^/  | /'
fi
same_state "$tmp-a" "$tmp-b" "killed with SIGKILL"
epoch_lines "$tmp.b.log" | sed 's/ (resumed)//' >"$tmp.b.epochs"
checks=$((checks + 1))
if cmp -s "$tmp.a.epochs" "$tmp.b.epochs"; then
    echo "ok: the epoch lines equal the uninterrupted run's"
else
    fail "epoch lines differ:"
    diff "$tmp.a.epochs" "$tmp.b.epochs" | sed 's/^/  | /'
fi

# --- SIGINT, SIGTERM and SIGHUP: a checkpoint, a message, 130, 143, 129 ---
# brigade leaves SIGHUP alone when it starts ignored (nohup, as a suite
# run in the background may be): it is set back to the default for the run
# where env can, and the HUP case skipped where it cannot.
hup_default=""
if env --default-signal=HUP true 2>/dev/null; then
    hup_default="env --default-signal=HUP"
fi
for sig in INT TERM HUP; do
    if [ $sig = HUP ] && [ -z "$hup_default" ] && grep -q '^SigIgn:.*[13579bdf]$' /proc/$$/status 2>/dev/null; then
        echo "skip: SIGHUP: ignored here and env cannot set it back"
        continue
    fi
    checks=$((checks + 1))
    # signalled once its first checkpoint is there, so mid-run however
    # slow the machine is
    $hup_default "$BRIGADE" train $run --checkpoint "$tmp-$sig" --checkpoint-every 5 >"$tmp.$sig.log" 2>&1 &
    pid=$!
    wait_until '[ -n "$(newest "$tmp-$sig")" ]'
    kill -$sig $pid
    wait $pid
    got=$?
    want=130
    [ $sig = TERM ] && want=143
    [ $sig = HUP ] && want=129
    if [ $got -eq $want ] && grep -q "stopped by SIG$sig after step" "$tmp.$sig.log" &&
        grep -q "run the same command with --resume $tmp-$sig" "$tmp.$sig.log"; then
        echo "ok: SIG$sig: exit $got, $(grep -o 'checkpoint in [^;]*' "$tmp.$sig.log")"
    else
        fail "SIG$sig: exit $got (want $want) or no message"
        sed 's/^/  | /' "$tmp.$sig.log" | tail -5
    fi
    expect 0 "resume   from" train $run --resume "$tmp-$sig"
    same_state "$tmp-a" "$tmp-$sig" "stopped by SIG$sig and resumed"
done

# --- a signal in an epoch's evaluation: each of its 6 pieces slowed by 3 s (BRG_DEBUG_SLOW_EVAL, not cut short by
# a signal) and SIGINT once the first has begun. The run stops after that piece, within 8 s (it waited for the whole
# evaluation, 15 s more), saved as the epoch trained but not evaluated; the resume evaluates it and ends as the
# uninterrupted run, byte for byte ---
# interrupt_evaluation PID LOG: SIGINT to PID once LOG says its slowed
# evaluation has begun; got is its exit status, took the seconds it took
interrupt_evaluation() {
    wait_until "grep -q BRG_DEBUG_SLOW_EVAL '$2'"
    start=$(date +%s)
    kill -INT "$1"
    wait "$1"
    got=$?
    took=$(($(date +%s) - start))
}
checks=$((checks + 1))
BRG_DEBUG_SLOW_EVAL=3 "$BRIGADE" train $run --checkpoint "$tmp-v" --checkpoint-every 5 >"$tmp.v.log" 2>&1 &
interrupt_evaluation $! "$tmp.v.log"
last=$(newest "$tmp-v")
if [ $got -eq 130 ] && [ $took -le 8 ] && grep -q "stopped by SIGINT during epoch 1's evaluation" "$tmp.v.log" &&
    grep -q "run the same command with --resume $tmp-v" "$tmp.v.log" && ! grep -q '^epoch 1:' "$tmp.v.log" &&
    [ "$(basename "$last")" = step-0000000024 ] && grep -q '"epoch": 1,' "$last/manifest.json" &&
    grep -q '"epoch_step": 24,' "$last/manifest.json"; then
    echo "ok: SIGINT in the evaluation: exit 130 in $took s (the evaluation had 15 s left), epoch 1 left to evaluate"
else
    fail "SIGINT in the evaluation: exit $got (want 130) in $took s, or no message, or not saved before the evaluation"
    sed 's/^/  | /' "$tmp.v.log" | tail -5
fi
expect 0 "resume   from $tmp-v/step-0000000024: epoch 1, after step 24 of 24" train $run --checkpoint-every 5 \
    --resume "$tmp-v"
cat "$out" >>"$tmp.v.log"
same_state "$tmp-a" "$tmp-v" "stopped in the evaluation and resumed"
checks=$((checks + 1))
epoch_lines "$tmp.v.log" | sed 's/ (resumed)//' | cmp -s "$tmp.a.epochs" - ||
    fail "stopped in the evaluation and resumed: the epoch lines differ from the uninterrupted run's"
# brigade eval stops too, with nothing to save (it ran to the end; a script's background job ignored SIGINT)
BRG_DEBUG_SLOW_EVAL=3 "$BRIGADE" eval fmnist-cnn --weights "$(newest "$tmp-a")/weights.safetensors" --data synthetic \
    --seed 3 --limit 192 --batch 32 --devices 1x64MiB >"$tmp.ve.log" 2>&1 &
interrupt_evaluation $! "$tmp.ve.log"
checks=$((checks + 1))
if [ $got -eq 130 ] && [ $took -le 8 ] && grep -q "eval: stopped by SIGINT during the evaluation.*nothing to save" \
    "$tmp.ve.log" && ! grep -q '^eval ' "$tmp.ve.log"; then
    echo "ok: eval: SIGINT in the evaluation: exit 130 in $took s"
else
    fail "eval: SIGINT in the evaluation: exit $got (want 130) in $took s, or no message, or figures printed"
    sed 's/^/  | /' "$tmp.ve.log" | tail -5
fi

# --- SIGINT twice: the same signal again within a second is one press delivered twice (`timeout -s INT` signals the
# run, then its group, not always merged) and must not cut the save short; one 1.5 s later exits at once, saying so,
# nothing more saved. Each evaluation piece is slowed by 6 s, so both land inside the first piece ---
# sigint_twice DIR GAP: a run into DIR, SIGINT once its evaluation has begun and again GAP seconds later; got is its
# exit status, took the seconds from the first SIGINT, DIR.log its output
sigint_twice() {
    BRG_DEBUG_SLOW_EVAL=6 "$BRIGADE" train $run --checkpoint "$1" --checkpoint-every 5 >"$1.log" 2>&1 &
    pid=$!
    wait_until "grep -q BRG_DEBUG_SLOW_EVAL '$1.log'"
    start=$(date +%s)
    kill -INT $pid
    sleep "$2"
    kill -INT $pid 2>/dev/null
    wait $pid
    got=$?
    took=$(($(date +%s) - start))
}
checks=$((checks + 1))
sigint_twice "$tmp-w" 0.2
if [ $got -eq 130 ] && grep -q "stopped by SIGINT during epoch 1's evaluation" "$tmp-w.log" &&
    ! grep -q "a second SIGINT" "$tmp-w.log" && [ "$(basename "$(newest "$tmp-w")")" = step-0000000024 ]; then
    echo "ok: SIGINT twice 0.2 s apart: one stop, saved after step 24, exit 130"
else
    fail "SIGINT twice 0.2 s apart: exit $got (want 130), or not stopped by the first, or not saved after step 24"
    sed 's/^/  | /' "$tmp-w.log" | tail -5
fi
checks=$((checks + 1))
sigint_twice "$tmp-x" 1.5
if [ $got -eq 130 ] && [ $took -le 4 ] && grep -q "^brigade: a second SIGINT: exiting at once, nothing more saved" \
    "$tmp-x.log" && ! grep -q "stopped by SIGINT" "$tmp-x.log" &&
    [ "$(basename "$(newest "$tmp-x")")" = step-0000000020 ]; then
    echo "ok: SIGINT twice 1.5 s apart: exit 130 at once ($took s), said, the checkpoint after step 20 stands"
else
    fail "SIGINT twice 1.5 s apart: exit $got (want 130) in $took s, or not said, or saved after the first"
    sed 's/^/  | /' "$tmp-x.log" | tail -5
fi

# --- a signal in train's setup (made 3 s slower, BRG_DEBUG_SLOW_SETUP, not
# cut short by it) stops the run at the phase's end, before its first
# step: nothing saved, and the folder that --checkpoint made is gone ---
BRG_DEBUG_SLOW_SETUP=3 "$BRIGADE" train $run --checkpoint "$tmp-su/new" >"$tmp.su.log" 2>&1 &
pid=$!
wait_until "grep -q BRG_DEBUG_SLOW_SETUP '$tmp.su.log'"
kill -INT $pid
wait $pid
got=$?
checks=$((checks + 1))
if [ $got -eq 130 ] && grep -q "stopped by SIGINT during the setup, before the first step; nothing saved" \
    "$tmp.su.log" && ! grep -q "step 1/\|^stage " "$tmp.su.log" && [ ! -e "$tmp-su" ]; then
    echo "ok: SIGINT in the setup: exit 130 before the plan and the first step, nothing left behind"
else
    fail "SIGINT in the setup: exit $got (want 130), or no message, or it planned or trained, or $tmp-su is left"
    sed 's/^/  | /' "$tmp.su.log" | tail -5
fi

# --- the output's reader gone in the training (a pipe to head, or to a
# tee that a closed terminal took with it; here a reader that leaves after
# the first progress line): SIGPIPE stops the run as a signal does, saved,
# and nothing is lost ---
# (SIGPIPE set back to the default where env can, as SIGHUP above)
pipe_default=""
if env --default-signal=PIPE true 2>/dev/null; then
    pipe_default="env --default-signal=PIPE"
fi
checks=$((checks + 1))
{ $pipe_default "$BRIGADE" train $run --checkpoint "$tmp-p" --checkpoint-every 5 2>"$tmp.p.log"; echo $? >"$tmp.p.rc"; } |
    grep -m 1 -q '^  epoch 1/3 step '
if [ "$(cat "$tmp.p.rc")" = 141 ] && grep -q "stopped by SIGPIPE .* after step" "$tmp.p.log" && [ -n "$(newest "$tmp-p")" ]
then
    echo "ok: SIGPIPE: exit 141, $(grep -o 'checkpoint in [^;]*' "$tmp.p.log")"
else
    fail "SIGPIPE: exit $(cat "$tmp.p.rc") (want 141) or no message or no checkpoint"
    sed 's/^/  | /' "$tmp.p.log" | tail -5
fi
expect 0 "resume   from" train $run --resume "$tmp-p"
same_state "$tmp-a" "$tmp-p" "stopped by SIGPIPE and resumed"
# the reader gone after the last epoch's line (while its checkpoint is
# saved): nothing to stop, the run is done and says its output was cut
checks=$((checks + 1))
{ BRG_DEBUG_SAVE_DELAY_MS=500 $pipe_default "$BRIGADE" train $one --checkpoint "$tmp-q" 2>"$tmp.q.log"
    echo $? >"$tmp.q.rc"; } | grep -m 1 -q '^epoch 1:'
if [ "$(cat "$tmp.q.rc")" = 141 ] && grep -q "the run is done, but its output's reader is gone" "$tmp.q.log" &&
    ! grep -q "stopped by" "$tmp.q.log"; then
    echo "ok: SIGPIPE after the last epoch: done, exit 141"
else
    fail "SIGPIPE after the last epoch: exit $(cat "$tmp.q.rc") (want 141), or it claimed a stop"
    sed 's/^/  | /' "$tmp.q.log" | tail -5
fi
expect 0 "nothing to do" train $one --resume "$tmp-q"

# --- one run to a folder: a second at the same time is refused, naming the
# first's process ---
BRG_DEBUG_SAVE_DELAY_MS=3000 "$BRIGADE" train $run --checkpoint "$tmp-f" --checkpoint-every 5 >"$tmp.f.log" 2>&1 &
pid=$!
wait_until '[ -n "$(ls -d "$tmp-f"/.step-*.tmp 2>/dev/null)" ]'
expect 1 "another run (process $pid on .*) is saving checkpoints in $tmp-f" train $run --resume "$tmp-f"
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
# its lock went with it: the folder is free again
expect 1 "holds no complete checkpoint" train $run --resume "$tmp-f"

# --- a save that fails (here a file in the way of step 10's temporary folder; a full disk or a read-only folder
# alike): exit 1 naming the last checkpoint and how to go on (it named only the cause); that checkpoint goes on ---
mkdir -p "$tmp-g"
: >"$tmp-g/.step-0000000010.tmp"
expect 1 "stopped after step 10, unsaved; the last checkpoint is $tmp-g/step-0000000005: .*run the same command with \
--resume $tmp-g" train $run --checkpoint "$tmp-g" --checkpoint-every 5
rm "$tmp-g/.step-0000000010.tmp"
expect 0 "resume   from $tmp-g/step-0000000005" train $run --checkpoint-every 5 --resume "$tmp-g"
same_state "$tmp-a" "$tmp-g" "a failed save, then resumed"

# --- another partition: three devices, ZB-H1 (the same micro-batches:
# BatchNorm's statistics are per micro-batch) ---
mkdir -p "$tmp-c"
cp -r "$(ls -d "$tmp-a"/step-* | sort | head -n 1)" "$tmp-c/"
expect 0 "peaks    measured = planned" train fmnist-cnn --data synthetic --limit 768 --batch 32 --microbatches 4 \
    --devices 3x64MiB --schedule zb-h1 --epochs 3 --seed 3 --resume "$tmp-c"
if command -v python3 >/dev/null 2>&1; then
    checks=$((checks + 1))
    if python3 - "$(newest "$tmp-a")/weights.safetensors" "$(newest "$tmp-c")/weights.safetensors" <<'EOF'; then
import json, struct, sys
def load(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    head = json.loads(b[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == '__metadata__':
            continue
        s, e = v['data_offsets']
        out[k] = struct.unpack('<%df' % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out
a, c = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == c.keys()
scale = max(abs(x) for t in a.values() for x in t)
worst = max(abs(x - y) for k in a for x, y in zip(a[k], c[k]))
print('  weights resumed on 3 devices: max difference %.3g of max |w| %.3g' % (worst, scale))
sys.exit(0 if worst <= 1e-3 * scale else 1)
EOF
        echo "ok: resumed on another partition, the weights agree within float tolerance"
    else
        fail "resumed on another partition, the weights differ"
    fi
fi

# --- bad input ---
mkdir -p "$tmp-empty"
expect 1 "holds no complete checkpoint" train $run --resume "$tmp-empty"
# a mistyped --resume folder is named, and not made by the run's lock
expect 1 "resume: cannot open the checkpoint folder $tmp-typo" train $run --resume "$tmp-typo"
checks=$((checks + 1))
[ ! -e "$tmp-typo" ] || fail "--resume $tmp-typo made the folder it did not find"
# ...before the data and the plan (it planned first), and so is an empty one (exit 2; it was exit 1 after the plan)
checks=$((checks + 1))
grep -q "^peaks: \|^data " "$out" && fail "--resume $tmp-typo was found missing only after the data and the plan"
expect 2 "train: --resume: an empty folder path" train $run --resume ""
: >"$tmp.file"
expect 1 "train: --resume: $tmp.file is not a folder" train $run --resume "$tmp.file"
# the same folder by another name (a link, a trailing /) is the resume's own:
# the finished run is found, not refused as another run's
ln -s "$tmp-a" "$tmp-link"
expect 0 "nothing to do" train $run --resume "$tmp-link" --checkpoint "$tmp-a/"
expect 2 "was made with --batch 32, this run has 64" train fmnist-cnn --data synthetic --limit 768 --batch 64 \
    --devices 2x64MiB --epochs 3 --seed 3 --resume "$tmp-a"
expect 2 "was made with --lr-schedule constant" train $run --lr-schedule cosine --resume "$tmp-a"
# another optimizer is named as such, not by the --lr its default brings
expect 2 "was made with --optimizer adam, this run has sgd.*: give --optimizer adam" train $run --optimizer sgd \
    --resume "$tmp-a"
expect 0 "nothing to do" train $run --resume "$tmp-a"
# ...but not with another model, which is refused before the run is called done (it said "nothing to do", exit 0)
expect 2 "is of another model than this run's .*'fc2' 10x1x1 and 'fc2' 5x1x1" train $run --classes 5 --resume "$tmp-a"
# more epochs at a constant rate go on from the end; a cosine schedule's
# rates are spread over its epochs, so there the count is refused
mkdir -p "$tmp-more"
cp -r "$(newest "$tmp-a")" "$tmp-more/"
expect 0 "^epoch 4: " train $run --epochs 4 --resume "$tmp-more"
checks=$((checks + 1))
[ "$(basename "$(newest "$tmp-more")")" = step-0000000096 ] || fail "4 epochs did not end at step 96"
# ...but never fewer than the checkpoint has begun
expect 2 "is at the end of epoch 4; --epochs 2 ends before it: give --epochs 4 or more" train $run --epochs 2 \
    --resume "$tmp-more"
cos="fmnist-cnn --data synthetic --limit 64 --batch 32 --devices 1x64MiB --lr-schedule cosine --seed 3"
expect 0 "^epoch 1:" train $cos --epochs 1 --checkpoint "$tmp-cos"
expect 2 "made with --epochs 1, this run has 2.*a cosine one spreads its rates" train $cos --epochs 2 --resume "$tmp-cos"
# a run stopped after its epoch's last step, before the evaluation (made
# here by editing a finished run's manifest back to that point, its
# checksum removed as in a manifest written before checksums): the resume
# evaluates and ends the epoch, and saving that step again records it, so
# the next resume does nothing (it evaluated again, every time)
expect 0 "^epoch 1:" train $one --checkpoint "$tmp-l"
sed -e '/"manifest_crc32"/d' -e 's/"epoch": 2,/"epoch": 1,/' -e 's/"epoch_step": 0,/"epoch_step": 24,/' -e 's/"epoch_seen": 0,/"epoch_seen": 768,/' \
    -e 's/"epoch_counted": 0,/"epoch_counted": 768,/' "$(newest "$tmp-l")/manifest.json" >"$tmp.manifest" &&
    cat "$tmp.manifest" >"$(newest "$tmp-l")/manifest.json"
expect 0 "^epoch 1: .*(resumed)" train $one --resume "$tmp-l"
checks=$((checks + 1))
grep -q "no training step ran" "$out" || fail "a resume that only evaluates compared its peaks with the plan"
expect 0 "nothing to do" train $one --resume "$tmp-l"
# a fresh run into a folder with checkpoints would take them for its own
expect 2 "holds checkpoints already (2, the newest step-0000000072).*give --resume" train $run --checkpoint "$tmp-a"
# ...and when none of them is complete, it does not send you to --resume
mkdir -p "$tmp-i/step-0000000005"
expect 2 "none of them a complete checkpoint to resume from (.*manifest.json is missing.*): to start afresh give" \
    train $run --checkpoint "$tmp-i"
# an edited manifest: its checksum no longer matches, so it is passed over
# like a damaged file, for the checkpoint before it
mkdir -p "$tmp-e"
cp -r "$tmp-a"/step-* "$tmp-e/"
sed 's/"epoch": *[0-9]*/"epoch": 2/' "$(newest "$tmp-e")/manifest.json" >"$tmp.manifest" &&
    cat "$tmp.manifest" >"$(newest "$tmp-e")/manifest.json"
expect 0 "passed over newer checkpoints that are not complete: step-0000000072: .*manifest.json: its content's \
checksum is [0-9a-f]*, but it records [0-9a-f]* (a damaged or edited manifest)" train $run --resume "$tmp-e"
# ...and without the checksum (a manifest written before there were any),
# its position in the epoch no longer matching its steps is found
rm -rf "$tmp-e"; mkdir -p "$tmp-e"
cp -r "$(newest "$tmp-a")" "$tmp-e/"
sed -e '/"manifest_crc32"/d' -e 's/"epoch": *[0-9]*/"epoch": 2/' "$(newest "$tmp-e")/manifest.json" >"$tmp.manifest" &&
    cat "$tmp.manifest" >"$(newest "$tmp-e")/manifest.json"
expect 1 "do not agree (an edited or damaged manifest.json)" train $run --resume "$tmp-e"
expect 2 "give one of them" train $run --resume "$tmp-a" --init-weights x.safetensors
expect 2 "apply to --checkpoint DIR" train $run --checkpoint-every 3
expect 2 "--keep '0' must be" train $run --checkpoint "$tmp-x" --keep 0
# A refused run leaves no new folder behind: --checkpoint's (made with its
# parents to hold it from the start) goes again when the run ends without a
# save, but a folder that was there stays.
mkdir -p "$tmp-noimages" "$tmp-pre"
expect 2 "neither fashion-mnist, synthetic nor a folder" train $one --data "$tmp-nowhere" --checkpoint "$tmp-new/y/z"
expect 1 "holds no class folders" train $one --data "$tmp-noimages" --val-split 0.2 --checkpoint "$tmp-new/y/z"
expect 1 "the plan does not fit 1x1MiB" train $one --devices 1x1MiB --checkpoint "$tmp-new/y/z/"
# ...also when the path ends in "/." (the lock's folder, "z", was not counted as made: its lock file stayed)
expect 1 "the plan does not fit 1x1MiB" train $one --devices 1x1MiB --checkpoint "$tmp-new/y/z/."
expect 1 "holds no class folders" train $one --data "$tmp-noimages" --val-split 0.2 --checkpoint "$tmp-pre/c"
checks=$((checks + 1))
[ ! -e "$tmp-new" ] && [ -d "$tmp-pre" ] && [ ! -e "$tmp-pre/c" ] ||
    fail "a refused run left folders behind: $(find "$tmp-new" "$tmp-pre" 2>&1 | tr '\n' ' ')"
# past a "..", the folders the lock made go too (it left $tmp-up1 and $tmp-up3), and only those: $tmp-pre, reached
# through a made folder, stays (it was removed)
b=$(basename "$tmp")
expect 1 "holds no class folders" train $one --data "$tmp-noimages" --val-split 0.2 --checkpoint "$tmp-up1/../$b-up2/ck"
expect 1 "holds no class folders" train $one --data "$tmp-noimages" --val-split 0.2 --checkpoint "$tmp-up3/../$b-pre"
checks=$((checks + 1))
[ ! -e "$tmp-up1" ] && [ ! -e "$tmp-up2" ] && [ ! -e "$tmp-up3" ] && [ -d "$tmp-pre" ] ||
    fail "a refused run past '..' removed or left the wrong folders: $(ls -d "$tmp"-up* "$tmp-pre" 2>&1 | tr '\n' ' ')"
# the newest checkpoint half written: passed over, said so
cp -r "$tmp-a" "$tmp-d"
half="$tmp-d/step-0000009999"
mkdir "$half"
cp "$(newest "$tmp-a")/weights.safetensors" "$half/"
expect 0 "passed over newer checkpoints that are not complete: step-0000009999: .*manifest.json is missing" \
    train $run --resume "$tmp-d"
rm -rf "$half"
# a damaged file: a checksum mismatch, named, and the checkpoint before it used
printf 'X' | dd of="$(newest "$tmp-d")/optimizer.safetensors" bs=1 seek=100 conv=notrunc 2>/dev/null
expect 0 "optimizer.safetensors: checksum" train $run --resume "$tmp-d"

# --- brigade eval: the final weights give the last epoch's test line ---
expect 0 "top-5" eval fmnist-cnn --weights "$(newest "$tmp-a")/weights.safetensors" --data synthetic --seed 3 --limit 192 \
    --batch 32 --devices 1x64MiB
checks=$((checks + 1))
want=$(grep '^epoch 3:' "$tmp.a.log" | sed 's/.*test loss \([0-9.]*\) acc \([0-9.]*%\).*/\1 \2/')
got=$(grep '^eval ' "$out" | sed 's/.*: loss \([0-9.]*\), top-1 \([0-9.]*%\).*/\1 \2/')
if [ -n "$want" ] && [ "$want" = "$got" ]; then
    echo "ok: eval on one device: loss and top-1 $got, as the run's last epoch"
else
    fail "eval gave '$got', the run's last epoch '$want'"
fi
# manifest_opens MANIFEST WHAT ARGS...: run brigade ARGS under strace; it must end well (exit 0, its output matching
# WHAT) having opened the file MANIFEST once (where strace can trace)
manifest_opens() {
    manifest=$1; what=$2; shift 2
    if ! command -v strace >/dev/null 2>&1 || ! strace -f -e trace=%file -o /dev/null true 2>/dev/null; then
        echo "strace missing or not allowed here: skipping the count of the opens of $manifest"
        return
    fi
    checks=$((checks + 1))
    strace -f -e trace=%file -o "$tmp.strace" "$BRIGADE" "$@" >"$out" 2>&1
    got=$?
    n=$(grep -c "open[at]*(.*\"$manifest\"" "$tmp.strace")
    if [ $got -eq 0 ] && grep -q -- "$what" "$out" && [ "$n" -eq 1 ]; then
        echo "ok: brigade $1 opened $manifest once"
    else
        fail "brigade $* exited $got, opening $manifest $n times, not once"
        sed 's/^/  | /' "$out"
    fi
}
# eval reads and checks the checkpoint's manifest once, for its settings, its classes and the weights' checksum (it
# read it three times)
manifest_opens "$(newest "$tmp-a")/manifest.json" "^eval .*top-5" eval fmnist-cnn \
    --weights "$(newest "$tmp-a")/weights.safetensors" --data synthetic --seed 3 --limit 64 --batch 32 --devices 1x64MiB
# so does train --resume, for the settings and the load (it read it three times: finding the newest complete
# checkpoint, for the settings, and again to load it); saved elsewhere, so that no save reads it
manifest_opens "$(newest "$tmp-a")/manifest.json" "^epoch 4: " train $run --epochs 4 --resume "$tmp-a" \
    --checkpoint "$tmp-ro"
# the weights are still checked against the checksum that one reading lists
mkdir -p "$tmp-dw"
cp -r "$(newest "$tmp-a")" "$tmp-dw/"
printf 'X' | dd of="$(newest "$tmp-dw")/weights.safetensors" bs=1 seek=3000 conv=notrunc 2>/dev/null
expect 1 "weights.safetensors: checksum [0-9a-f]*, but its checkpoint's manifest says [0-9a-f]* (a damaged file)" \
    eval fmnist-cnn --weights "$(newest "$tmp-dw")/weights.safetensors" --data synthetic --limit 64 --devices 1x64MiB
rm -rf "$tmp-dw"
# another model's checkpoint: refused before planning, exit 2, as train --resume refuses it (it planned, then failed
# loading with exit 1)
expect 2 "is of another model than this run's" eval fmnist-cnn --classes 5 \
    --weights "$(newest "$tmp-a")/weights.safetensors" --data synthetic --limit 64 --devices 1x64MiB
checks=$((checks + 1))
grep -q "^peaks: " "$out" && fail "eval planned another model's checkpoint before refusing it"
expect 2 "which weights" eval fmnist-cnn --data synthetic
# --weights checked before the data and the plan: a checkpoint folder names the weights file meant, a missing file is
# said at once (both planned first, then failed with exit 1: "... is not a file that can be read")
expect 2 "is a checkpoint's folder; give its weights file: --weights $tmp-a/step-0000000072/weights.safetensors" \
    eval fmnist-cnn --weights "$tmp-a/" --data synthetic --limit 64 --devices 1x64MiB
expect 1 "eval: --weights: cannot read $tmp.none.safetensors: No such file" eval fmnist-cnn \
    --weights "$tmp.none.safetensors" --data synthetic --limit 64 --devices 1x64MiB
checks=$((checks + 1))
grep -q "^peaks: " "$out" && fail "eval planned before finding that its --weights file is missing"
# a checkpoint whose manifest is damaged: refused at once, naming it (it
# warned that the command line's settings were used, planned, then failed
# loading the weights against that manifest)
mkdir -p "$tmp-dm"
cp -r "$(newest "$tmp-a")" "$tmp-dm/"
sed 's/"epoch": *[0-9]*/"epoch": 2/' "$(newest "$tmp-dm")/manifest.json" >"$tmp.manifest" &&
    cat "$tmp.manifest" >"$(newest "$tmp-dm")/manifest.json"
expect 1 "brigade eval: --weights: the checkpoint .*-dm/step-0000000072 cannot be used: .*checksum" eval fmnist-cnn \
    --weights "$(newest "$tmp-dm")/weights.safetensors" --data synthetic --devices 1x64MiB
checks=$((checks + 1))
! grep -q "^stage \|warning: cannot read" "$out" || fail "eval planned or warned before refusing a damaged checkpoint"
rm -rf "$tmp-dm"
expect 1 "the plan does not fit 1x16MiB, so the evaluation does not start" eval fmnist-cnn \
    --weights "$(newest "$tmp-a")/weights.safetensors" --data synthetic --seed 3 --limit 192 --devices 1x16MiB
expect 2 "which data" eval fmnist-cnn --weights w.safetensors
expect 2 "unrecognized option\|unknown option" eval fmnist-cnn --weights w.safetensors --data synthetic --lr 0.1
expect 0 "usage: brigade eval" eval --help

# --- weights alone ---
expect 0 "the initial weights of model fmnist-cnn for seed 3" model export fmnist-cnn --weights "$tmp.init.safetensors" \
    --seed 3
expect 0 "weights  from" train fmnist-cnn --data synthetic --limit 64 --batch 32 --devices 1x64MiB \
    --init-weights "$tmp.init.safetensors"
expect 0 "the weights of model fmnist-cnn from" model export fmnist-cnn --weights "$tmp.trained.safetensors" \
    --from "$tmp-a"
expect 0 "the initial weights of model fmnist-cnn" model export fmnist-cnn --classes 5 \
    --weights "$tmp.five.safetensors" --seed 3
# Another model's weights, and a truncated file, are refused by their
# header before the data and the plan, not after planning
expect 1 "has no tensor 'conv1.weight'" train resnet18 --input 1x28x28 --classes 10 --data synthetic \
    --limit 64 --batch 32 --devices 1x256MiB --init-weights "$tmp.trained.safetensors"
not_planned() {
    checks=$((checks + 1))
    ! grep -q "^stage \|^peak per stage\|^loader " "$out" || fail "$1 planned or loaded data before refusing the weights"
}
not_planned "train --init-weights of another model"
expect 1 "tensor 'fc2.weight' has shape \[5x128\]; the model's is \[10x128\]" train fmnist-cnn --classes 10 \
    --data synthetic --limit 64 --batch 32 --devices 1x64MiB --init-weights "$tmp.five.safetensors"
not_planned "train --init-weights of another shape"
head -c -100 "$tmp.trained.safetensors" >"$tmp.cut.safetensors"
expect 1 "cut.safetensors: tensor '.*': its data runs past the end of the file (truncated?)" eval fmnist-cnn \
    --weights "$tmp.cut.safetensors" --data synthetic --devices 1x64MiB
not_planned "eval --weights of a truncated file"
expect 1 "cut.safetensors: tensor '.*': its data runs past the end of the file (truncated?)" train fmnist-cnn \
    --data synthetic --limit 64 --batch 32 --devices 1x64MiB --init-weights "$tmp.cut.safetensors"
not_planned "train --init-weights of a truncated file"
# --checkpoint in a checkpoint (a step-N folder, or under one): refused
# before anything is written (it wrote its lock and steps in there)
inner=$(newest "$tmp-a")
expect 2 "--checkpoint $inner is in the checkpoint $inner, where this run's files would mix" train fmnist-cnn \
    --data synthetic --limit 64 --batch 32 --devices 1x64MiB --checkpoint "$inner"
expect 2 "--checkpoint $inner/sub is in the checkpoint $inner, where" train fmnist-cnn --data synthetic --limit 64 \
    --batch 32 --devices 1x64MiB --checkpoint "$inner/sub"
checks=$((checks + 1))
[ "$(ls -A "$inner" | tr '\n' ' ')" = "manifest.json optimizer.safetensors weights.safetensors " ] ||
    fail "the refused --checkpoint wrote into $inner: $(ls -A "$inner")"
# A NaN in the data (the first float after the header): refused naming the
# tensor and the element; it trained to a loss "diverged" at step 1,
# blaming --lr, and evaluated to a loss of nan with exit 0
cp "$tmp.trained.safetensors" "$tmp.nan.safetensors"
header=$(od -An -t u8 -N 8 "$tmp.nan.safetensors" | tr -d ' ')
printf '\000\000\300\177' | dd of="$tmp.nan.safetensors" bs=1 seek=$((8 + header)) conv=notrunc 2>/dev/null
expect 1 "nan.safetensors: tensor '.*' holds NaN at element 0: not a state to load" eval fmnist-cnn \
    --weights "$tmp.nan.safetensors" --data synthetic --devices 1x64MiB
expect 1 "nan.safetensors: tensor '.*' holds NaN at element 0: not a state to load" train fmnist-cnn \
    --data synthetic --limit 64 --batch 32 --devices 1x64MiB --init-weights "$tmp.nan.safetensors"
# The largest floats instead (finite, loaded): the logits overflow, and eval
# says its loss is not finite and exits 1 (it printed nan and exited 0)
cp "$tmp.trained.safetensors" "$tmp.max.safetensors"
for k in 0 1 2 3; do
    printf '\377\377\177\177' | dd of="$tmp.max.safetensors" bs=1 seek=$((8 + header + 4 * k)) conv=notrunc 2>/dev/null
done
expect 1 "brigade eval: the loss is not finite: the weights overflow on this data" eval fmnist-cnn \
    --weights "$tmp.max.safetensors" --data synthetic --devices 1x64MiB
cat "$tmp.trained.safetensors" "$tmp.trained.safetensors" >"$tmp.twice.safetensors"
expect 1 "twice.safetensors: bytes after the last tensor's data" eval fmnist-cnn --weights "$tmp.twice.safetensors" \
    --data synthetic --devices 1x64MiB
not_planned "eval --weights of an extended file"
expect 1 "has no tensor" eval resnet18 --input 1x28x28 --classes 10 --weights "$tmp.trained.safetensors" \
    --data synthetic --devices 1x256MiB
not_planned "eval --weights of another model"
expect 1 "no-such.safetensors" train fmnist-cnn --data synthetic --limit 64 --batch 32 --devices 1x64MiB \
    --init-weights "$tmp.no-such.safetensors"
expect 2 "choose the weights of --weights" model export fmnist-cnn --seed 3 -o "$tmp.m.json"
# one file for two things: refused before anything is written
expect 2 "--weights and -o name the same file" model export fmnist-cnn --weights "$tmp.m.json" -o "$tmp.m.json"
# --weights - is refused (it wrote a file named -): weights are binary, never standard output
expect 2 "--weights - : the weights are a binary safetensors file, not written to standard output" model export \
    fmnist-cnn -o - --weights -
checks=$((checks + 1))
[ ! -e ./- ] || fail "model export --weights - wrote a file named -"
expect 2 "--weights and -o name the same file" model export fmnist-cnn -o "$tmp.n.json" \
    --weights "$(dirname "$tmp")/./$(basename "$tmp").n.json"
checks=$((checks + 1))
[ ! -e "$tmp.n.json" ] || fail "a refused export wrote $tmp.n.json"
cp "$(newest "$tmp-a")/weights.safetensors" "$tmp.w.copy"
expect 2 "is in a checkpoint's folder" model export fmnist-cnn --weights "$(newest "$tmp-a")/weights.safetensors" \
    --from "$tmp-a"
expect 2 "is in a checkpoint's folder" model export fmnist-cnn --weights "$(newest "$tmp-a")/other.safetensors"
checks=$((checks + 1))
cmp -s "$tmp.w.copy" "$(newest "$tmp-a")/weights.safetensors" || fail "the checkpoint's weights changed"
expect 1 "holds no complete checkpoint" model export fmnist-cnn --weights "$tmp.w.safetensors" --from "$tmp-empty"
# Another model's checkpoint is the wrong thing given, as for train --resume
expect 2 "is of another model than this run's .*'fmnist-cnn' against this 'resnet18'" model export resnet18 \
    --weights "$tmp.w2.safetensors" --from "$tmp-a"
checks=$((checks + 1))
[ ! -e "$tmp.w2.safetensors" ] || fail "an export from another model's checkpoint wrote $tmp.w2.safetensors"

finish

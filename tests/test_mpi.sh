#!/bin/sh
# One pipeline across processes with Open MPI on this machine
# (docs/distributed.md): test_distributed on 2, 3 and 4 ranks (p = R and
# p = 2R CPU devices, every schedule; synchronous and cpu-async devices,
# these also loading their kernels lazily as a GPU does),
# then the command line: fmnist-cnn across 4 ranks equals one process, and
# as 2 stages x 2 replicas (--replicas 2) too, both also on cpu-async
# devices (their communicators, NCCL's twin), also on an image folder
# each replica reads its share of, and --sync-bn trains 2 replicas as one
# process with twice their micro-batch; bad use of ranks, devices and
# replicas is named; bench spans 2 ranks; checkpoints written across ranks
# resume anywhere, and eval spans ranks; a signal to one rank in the
# evaluation stops every rank together; options that differ between
# ranks are named; what the ranks hold of their standard error is
# compared line by line (at bench's setup's end too), and printed headed
# with its rank, also by a rank that another rank's abort ends; a rank
# killed with SIGKILL ends the job within 10
# seconds, named, and one stopped with SIGSTOP within 10 too (the
# watchdog and the heartbeat, in train and bench, and in the setup, where
# a slow rank is not taken for a stopped one, nor a job suspended whole). Where a GPU is visible and the build has NCCL,
# test_distributed also runs on CUDA devices of 2 ranks (NCCL).
# Skips (77) where this build has no MPI or mpirun is missing.
set -u
if [ -z "${MPIRUN:-}" ] || ! command -v "$MPIRUN" >/dev/null 2>&1 || [ ! -x ./test_distributed ]; then
    echo "SKIP: no MPI in this build or no mpirun (install openmpi-bin libopenmpi-dev; configure says MPI: yes)"
    exit 77
fi
# Tests run as root in CI containers; more ranks than cores is the point.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
# The one-process runs compared with the ranks' plan with FLOP-based times
# as the ranks do (the CPU calibration is off under mpirun).
export BRG_CPU_CALIBRATION=off
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
# The twin of CUDA's lazy kernel loading: a kernel's first launch waits
# for every stream of the process, communicators' included. Without the
# warm-up before the first step (brg_program_warm_up) ZB-V's first step
# hangs here (a rank loads a kernel while its send waits for the peer,
# which loads one while its receive waits), so the timeout is short.
check "test_distributed on 2 ranks of cpu-async devices that load kernels lazily (the warm-up)" \
    env BRG_TEST_CPU=async BRG_DEBUG_LOADS=1 timeout 120 mpirun -np 2 ./test_distributed
# The twin of NCCL's lazy connections: a communicator's first message or
# sum waits on the host for the peer's first. Connected at their first
# message, ZB-V on four devices of two ranks hangs here (a worker's first
# receive waits for its peer's first send, while the peer's worker waits on
# the host for its compute stream, which waits for a message from the
# first); brigade connects them as they are made.
check "test_distributed on 2 ranks of cpu-async devices that connect lazily (connected when made)" \
    env BRG_TEST_CPU=async BRG_DEBUG_CONNECT=1 timeout 120 mpirun -np 2 ./test_distributed

B=${BRIGADE:-../cli/brigade}
# CUDA devices on different ranks exchange messages and sum gradients
# through NCCL. Where a GPU is visible and the build has NCCL,
# test_distributed runs on 2 ranks of CUDA virtual devices of GPU 0. NCCL
# refuses two ranks of one host on one GPU, so each rank names a host of
# its own (NCCL_HOSTID) and NCCL joins them as two nodes, by its socket
# transport over the loopback: the path of two GPUs, on one.
if "$B" info 2>/dev/null | grep -q 'NCCL yes); CUDA devices available'; then
    check "test_distributed on 2 ranks of CUDA devices of one GPU (NCCL)" env BRG_TEST_CPU=cuda NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
        timeout 600 "$MPIRUN" --oversubscribe -np 1 env NCCL_HOSTID=brigade-rank-0 ./test_distributed : \
        -np 1 env NCCL_HOSTID=brigade-rank-1 ./test_distributed
else
    echo "(no GPU visible, or no NCCL in this build: the NCCL case is left out)"
fi

# The command line. fmnist-cnn's job on 4 ranks (a stage each) prints the
# same epoch line as in one process: loss, accuracy and test figures.
# The epoch line of a job's output: mpirun may give rank 0 a terminal, and
# progress then redraws one line.
epoch_line() { sed 's/\x1b\[K/\n/g' | tr '\r' '\n' | grep '^epoch 1:'; }
# The verdict on a command-line job: ok when $1 is y and its log $2 shows
# every peak as planned (the log then goes); otherwise FAIL, keeping it.
job_verdict() { # y or not, log, what passed, what failed
    if [ "$1" = y ] && grep -q 'measured = planned on every device' "$2"; then
        echo "ok: $3"
        rm -f "$2"
    else
        echo "FAIL: $4 (tests/$2)"
        fails=$((fails + 1))
    fi
}
# The verdict on a job whose log is $2: ok when $1 is y (the log then
# goes); otherwise FAIL with the log's last lines, keeping it.
log_verdict() { # y or not, log, what passed, what failed
    if [ "$1" = y ]; then
        echo "ok: $3"
        rm -f "$2"
    else
        echo "FAIL: $4 (tests/$2):"
        tail -8 "$2" | sed 's/^/  | /'
        fails=$((fails + 1))
    fi
}
job="train fmnist-cnn --data fashion-mnist --devices 4x11MiB --batch 64 --microbatches 8 --epochs 1 --lr 0.001 --optimizer adam --seed 1 --limit 4096"
if [ -f "${BRG_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}/train-images-idx3-ubyte.gz" ]; then
    one=$("$B" $job 2>&1 | grep '^epoch 1:' | sed 's/, [0-9.]* s (.*//')
    four=$(mpirun -np 4 "$B" $job 2>&1 | tee mpi-train.log | epoch_line | sed 's/, [0-9.]* s (.*//')
    # (and its progress in lines, no terminal redraws in the log)
    same=$([ -n "$one" ] && [ "$one" = "$four" ] && grep -q '^ranks    4 processes, 1 device each' mpi-train.log &&
        ! grep -q "$(printf '\033')" mpi-train.log && grep -q '^  epoch 1/1 step' mpi-train.log && echo y)
    job_verdict "$same" mpi-train.log "fmnist-cnn on 4 ranks: $four" "fmnist-cnn on 4 ranks gave '$four', one process '$one'"
    # On cpu-async devices the messages between ranks go through
    # communicators (the CPU twin of NCCL's): the same epoch line.
    four=$(mpirun -np 4 "$B" $(printf '%s' "$job" | sed 's/4x11MiB/cpu-async:4x11MiB/') 2>&1 | tee mpi-async.log |
        epoch_line | sed 's/, [0-9.]* s (.*//')
    same=$([ -n "$one" ] && [ "$one" = "$four" ] && echo y)
    job_verdict "$same" mpi-async.log "fmnist-cnn on 4 ranks of cpu-async devices (communicators): $four" \
        "fmnist-cnn on 4 ranks of cpu-async devices gave '$four', one process '$one'"
    # Replicas: 2 stages x 2 replicas over 4 ranks, each taking 4 of the
    # batch's 8 micro-batches. With deferred BatchNorm the epoch line is one
    # process's on 2 devices with all 8 within rounding: the replicas' sums
    # of gradients are added across them, one device adds micro-batch after
    # micro-batch, and Adam carries the last bits through 64 steps (losses
    # within 0.002, accuracies within 0.2 points; on an AMD EPYC the test
    # figures differ in the fourth digit). Without, the running averages are
    # averaged over the replicas and the test accuracy stays within a point.
    rjob="train fmnist-cnn --data fashion-mnist --batch 64 --epochs 1 --lr 0.001 --optimizer adam --seed 1 --limit 4096"
    acc() { printf '%s' "$1" | sed -n 's/.*test loss [0-9.]* acc \([0-9.]*\)%.*/\1/p'; }
    # The four figures of an epoch line: train loss, acc, test loss, acc.
    figures() { printf '%s' "$1" | sed -n 's/.*train loss \([0-9.]*\) acc \([0-9.]*\)%, test loss \([0-9.]*\) acc \([0-9.]*\)%.*/\1 \2 \3 \4/p'; }
    close() { # figures a, figures b: y when losses agree within 0.002 and accuracies within 0.2 points
        printf '%s\n%s\n' "$(figures "$1")" "$(figures "$2")" | awk '
            NR == 1 { for (i = 1; i <= 4; i++) a[i] = $i; n = NF }
            NR == 2 && n == 4 && NF == 4 { ok = 1
                for (i = 1; i <= 4; i++) { d = a[i] - $i; if (d < 0) d = -d; if (d > (i % 2 ? 0.002 : 0.2)) ok = 0 }
                if (ok) print "y" }'
    }
    for bn in --deferred-bn ""; do
        one=$("$B" $rjob $bn --devices 2x11MiB --microbatches 8 2>&1 | grep '^epoch 1:' | sed 's/, [0-9.]* s (.*//')
        rep=$(mpirun -np 4 "$B" $rjob $bn --devices 4x11MiB --microbatches 4 --replicas 2 2>&1 | tee mpi-replicas.log |
            epoch_line | sed 's/, [0-9.]* s (.*//')
        if [ -n "$bn" ]; then same=$(close "$one" "$rep")
        else same=$(awk -v a="$(acc "$one")" -v b="$(acc "$rep")" 'BEGIN { d = a - b; if (a != "" && b != "" && d < 1 && d > -1) print "y" }')
        fi
        [ "$same" = y ] && ! grep -q '2 replicas of 2 devices' mpi-replicas.log && same=n
        job_verdict "$same" mpi-replicas.log "fmnist-cnn, 2 stages x 2 replicas on 4 ranks${bn:+ ($bn)}: $rep" \
            "fmnist-cnn with --replicas 2${bn:+ $bn} gave '$rep', one process '$one'"
        # cpu-async replicas sum through their communicators (NCCL's
        # twin), the same sums in the same order: the same line.
        arep=$(mpirun -np 4 "$B" $rjob $bn --devices cpu-async:4x11MiB --microbatches 4 --replicas 2 2>&1 |
            tee mpi-async-replicas.log | epoch_line | sed 's/, [0-9.]* s (.*//')
        same=$([ -n "$rep" ] && [ "$rep" = "$arep" ] && echo y)
        job_verdict "$same" mpi-async-replicas.log "the same on cpu-async devices (communicators): $arep" \
            "fmnist-cnn with --replicas 2${bn:+ $bn} on cpu-async devices gave '$arep', on cpu devices '$rep'"
    done
    # Each replica reads only its share of an image folder: the same epoch
    # line, the skipped bad images (counted over the replicas) included.
    png=mpi-png
    rm -rf "$png"
    "$B" data export fashion-mnist "$png" --limit 1024 >/dev/null
    d="$png/train/4-coat"
    head -c 200 "$d/$(ls "$d" | head -n 1)" >"$d/truncated.png"
    : >"$d/empty.png"
    fjob="train fmnist-cnn --data $png --resize 28 --no-flip --batch 64 --epochs 1 --lr 0.001 --optimizer adam --seed 1 --deferred-bn"
    one=$("$B" $fjob --devices 2x11MiB --microbatches 8 2>&1 | grep '^epoch 1:' | sed 's/, [0-9.]* s (.*)//')
    rep=$(mpirun -np 4 "$B" $fjob --devices 4x11MiB --microbatches 4 --replicas 2 2>&1 | tee mpi-folder.log |
        epoch_line | sed 's/, [0-9.]* s (.*)//')
    same=$([ -n "$one" ] && [ "$one" = "$rep" ] && printf '%s' "$rep" | grep -q '2 bad images skipped' && echo y)
    job_verdict "$same" mpi-folder.log "an image folder, each replica reading its share: $rep" \
        "an image folder with --replicas 2 gave '$rep', one process '$one'"
    rm -rf "$png"
    # Synchronized BatchNorm: 2 replicas of micro-batch 8 train as one
    # process with micro-batch 16 (test_distributed checks the gradients
    # and weights to 1e-5). The epoch line is not the same to the last
    # digit (other ops, other rounding, 64 steps); without --sync-bn the
    # train loss is 0.005 away, with it within 0.002.
    sjob="train fmnist-cnn --data fashion-mnist --batch 64 --epochs 1 --lr 0.01 --optimizer sgd --seed 1 --limit 4096"
    one=$("$B" $sjob --devices 2x20MiB --microbatches 4 2>&1 | grep '^epoch 1:')
    rep=$(mpirun -np 4 "$B" $sjob --devices 4x11MiB --microbatches 4 --replicas 2 --sync-bn 2>&1 | tee mpi-sync.log |
        epoch_line)
    loss() { printf '%s' "$1" | sed -n 's/.*train loss \([0-9.]*\) .*/\1/p'; }
    close=$(awk -v a="$(loss "$one")" -v b="$(loss "$rep")" 'BEGIN { d = a - b; if (a != "" && b != "" && d <= 0.002 && d >= -0.002) print "y" }')
    job_verdict "$close" mpi-sync.log "--sync-bn, 2 replicas of micro-batch 8 train as micro-batch 16: '$rep', one process '$one'" \
        "--sync-bn gave '$rep', one process with micro-batch 16 '$one'"
else
    echo "(Fashion-MNIST not installed: the command-line jobs are left out)"
fi

# Bad use, named: devices that do not divide among the ranks, a command
# that runs in one process.
expect() { # what, exit code, text, then the command
    what=$1 code=$2 text=$3
    shift 3
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" -eq "$code" ] && printf '%s' "$out" | grep -q -- "$text"; then
        echo "ok: $what (exit $rc)"
    else
        echo "FAIL: $what: exit $rc, wanted $code and '$text':"
        printf '%s\n' "$out" | sed 's/^/  | /' | tail -15
        fails=$((fails + 1))
    fi
}
expect "4 devices on 3 ranks" 2 "give a multiple of 3 devices" \
    timeout 60 mpirun -np 3 "$B" train fmnist-cnn --data synthetic --devices 4x11MiB --limit 256
expect "--replicas 2 on 3 ranks" 2 "start a multiple of 2" \
    timeout 60 mpirun -np 3 "$B" train fmnist-cnn --data synthetic --devices 6x11MiB --limit 256 --replicas 2
expect "--replicas 3 of 4 devices" 2 "cannot be shared by 3 replicas" \
    timeout 60 mpirun -np 3 "$B" train fmnist-cnn --data synthetic --devices 4x11MiB --limit 256 --replicas 3
expect "--sync-bn without replicas" 2 "give --replicas 2 or more" \
    timeout 60 mpirun -np 2 "$B" train fmnist-cnn --data synthetic --devices 2x11MiB --limit 256 --sync-bn
expect "replicas of different sizes" 2 "same kinds and sizes" \
    timeout 60 mpirun -np 2 "$B" train fmnist-cnn --data synthetic --devices 11MiB,12MiB --limit 256 --replicas 2
expect "model under mpirun" 2 "runs in one process" timeout 60 mpirun -np 2 "$B" model list
# A refusal every rank reaches by itself ends the job as one: no rank
# aborts it (MPI_ABORT's banner, and the abort racing the others' exits),
# and what every rank said alike is printed once (it was once per rank).
out=$(timeout 60 mpirun -np 3 "$B" train fmnist-cnn --data synthetic --devices 3x1MiB --limit 256 2>&1)
rc=$?
if [ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$out" | grep -c "the plan does not fit")" -eq 1 ] &&
    [ "$(printf '%s\n' "$out" | grep -c "^hint: ")" -eq 1 ] && ! printf '%s' "$out" | grep -q "^rank [0-9]" &&
    ! printf '%s' "$out" | grep -q "MPI_ABORT\|ending every rank"; then
    echo "ok: a plan that fits no rank's devices ends every rank without an abort, said once (exit $rc)"
else
    echo "FAIL: a plan that fits no rank's devices: exit $rc, wanted 1, the message once and no abort:"
    printf '%s\n' "$out" | sed 's/^/  | /' | tail -15
    fails=$((fails + 1))
fi
# What one rank says alone is printed, headed with its rank, before it
# ends the job: its own working folder lacks the data (the same line, so
# the ranks agree on it).
mkdir -p mpi-wd-a mpi-wd-b
"$B" data export fashion-mnist mpi-wd-a/imgs --limit 16 >/dev/null 2>&1
expect "a folder one rank cannot see" 2 "^rank 1: brigade train: --data 'imgs/train' is neither" \
    timeout 60 mpirun -np 1 -wdir "$PWD/mpi-wd-a" "$B" train fmnist-cnn --data imgs/train --batch 8 --devices 2x64MiB \
    : -np 1 -wdir "$PWD/mpi-wd-b" "$B" train fmnist-cnn --data imgs/train --batch 8 --devices 2x64MiB
# and so is what a rank held when another rank's abort ends it (SIGTERM,
# SIGKILL a second later): rank 0's folder has no images, and it fails
# alone and ends the job; rank 1 warns of a file that is not an image and
# holds the warning while it waits for rank 0. Under train's own SIGTERM
# handler, and eval's (the hold's).
mkdir -p mpi-wd-b/imgs/train/0-x mpi-wd-b/imgs/val/0-x
echo "not an image" >mpi-wd-a/imgs/train/0-tshirt-top/notes.txt
# (eval's weights are there: they are checked before the data)
"$B" model export fmnist-cnn --weights mpi-wd-a/w.safetensors >/dev/null
cp mpi-wd-a/w.safetensors mpi-wd-b/w.safetensors
for c in train "eval --weights w.safetensors"; do
    out=$(timeout 60 mpirun -np 1 -wdir "$PWD/mpi-wd-b" "$B" $c fmnist-cnn --data imgs --batch 8 --devices 2x64MiB \
        : -np 1 -wdir "$PWD/mpi-wd-a" "$B" $c fmnist-cnn --data imgs --batch 8 --devices 2x64MiB 2>&1)
    rc=$?
    warned="^rank 1: brigade ${c%% *}: warning: imgs/train/0-tshirt-top/notes.txt: not a"
    if [ "$rc" -eq 1 ] && printf '%s' "$out" | grep -q "^brigade: rank 0 of 2: .*ending every rank" &&
        printf '%s' "$out" | grep -q "$warned"; then
        echo "ok: ${c%% *}: what a rank held is printed when another rank's abort ends it (exit $rc)"
    else
        echo "FAIL: ${c%% *}: a rank that another rank's abort ends: exit $rc, wanted 1, the abort and $warned:"
        printf '%s\n' "$out" | sed 's/^/  | /' | tail -15
        fails=$((fails + 1))
    fi
done
# The ranks compare what they held line by line: rank 0 warns of a file
# that rank 1's copy of the folder lacks, and rank 1 of one that rank 0's
# lacks. The lines they share are printed once (rank 1 printed them all
# again, headed, while whole texts were compared), rank 1's own alone is
# headed.
cp -r mpi-wd-a mpi-wd-c
cp -r mpi-wd-a mpi-wd-d
echo "not an image" >mpi-wd-c/imgs/train/0-tshirt-top/rank0-only.txt
echo "not an image" >mpi-wd-d/imgs/train/0-tshirt-top/rank1-only.txt
out=$(timeout 60 mpirun -np 1 -wdir "$PWD/mpi-wd-c" "$B" train fmnist-cnn --data imgs --batch 4 --devices 2x64MiB \
    : -np 1 -wdir "$PWD/mpi-wd-d" "$B" train fmnist-cnn --data imgs --batch 4 --devices 2x64MiB 2>&1 >/dev/null)
rc=$?
count() { printf '%s\n' "$out" | grep -c -- "$1"; }
if [ "$rc" -eq 0 ] && [ "$(count "notes.txt: not a")" -eq 1 ] && [ "$(count "rank0-only.txt: not a")" -eq 1 ] &&
    [ "$(count "^rank 1: ")" -eq 1 ] && [ "$(count "^rank 1: brigade train: warning: .*rank1-only.txt")" -eq 1 ]; then
    echo "ok: the ranks' warnings compared line by line: shared ones once, rank 1's own headed"
else
    echo "FAIL: the ranks' warnings compared line by line: exit $rc, wanted 0, each shared line once, one of rank 1's:"
    printf '%s\n' "$out" | sed 's/^/  | /' | tail -20
    fails=$((fails + 1))
fi
rm -rf mpi-wd-a mpi-wd-b mpi-wd-c mpi-wd-d
# bench compares what the ranks held at the end of its setup, as train
# and eval do, not at the end of the command: rank 1's note on its copy
# of a Keras model (the final softmax, dropped; rank 0's copy has none)
# is out while the first combination still runs.
mkdir -p mpi-wd-e mpi-wd-f
sed 's/"activation": "softmax"/"activation": "linear"/' "${srcdir:-.}/models/keras/sequential.json" >mpi-wd-e/m.json
cp "${srcdir:-.}/models/keras/sequential.json" mpi-wd-f/m.json
note="^rank 1: brigade bench: note: m.json: dropped the softmax"
long="--devices 2x64MiB --batch 64 --schedules 1f1b --microbatches 4 --steps 100000"
"$MPIRUN" --oversubscribe -np 1 -wdir "$PWD/mpi-wd-e" "$B" bench m.json $long \
    : -np 1 -wdir "$PWD/mpi-wd-f" "$B" bench m.json $long >mpi-bench-note.log 2>&1 &
mp=$!
running=0
for _ in $(seq 1 100); do
    kill -0 "$mp" 2>/dev/null || break
    grep -q "$note" mpi-bench-note.log && { running=1; break; }
    sleep 0.2
done
kill "$mp" 2>/dev/null
wait "$mp"
log_verdict "$([ "$running" -eq 1 ] && echo y)" mpi-bench-note.log \
    "bench: rank 1's note from its setup is out while the run goes on" "bench: no '$note' while the run went on"
rm -rf mpi-wd-e mpi-wd-f
# Settings no plan holds, given differently to the ranks (an MPMD line):
# refused by name before any step (they trained apart, or hung)
sbase="train fmnist-cnn --data synthetic --devices 2x11MiB --limit 256 --batch 32"
expect "--lr differing between ranks" 2 "the ranks disagree on --lr: rank 1 differs" \
    timeout 60 mpirun -np 1 "$B" $sbase --lr 0.001 : -np 1 "$B" $sbase --lr 0.5
expect "--checkpoint on one rank only" 2 "the ranks disagree on --checkpoint: rank 1 differs" \
    timeout 60 mpirun -np 1 "$B" $sbase --checkpoint ckpt-mpi-one-rank : -np 1 "$B" $sbase
expect "--watchdog-setup on one rank only" 2 "the ranks disagree on --watchdog-setup: rank 1 differs" \
    timeout 60 mpirun -np 1 "$B" $sbase --watchdog-setup 60 : -np 1 "$B" $sbase
# and those that make the plan, named (the pipelines' fingerprints
# differed, which named nothing); eval's weights; bench's whole line
expect "--schedule differing between ranks" 2 "the ranks disagree on --schedule: rank 1 differs" \
    timeout 60 mpirun -np 1 "$B" $sbase --schedule 1f1b : -np 1 "$B" $sbase --schedule gpipe
expect "eval --weights differing between ranks" 2 "the ranks disagree on --weights: rank 1 differs" \
    timeout 60 mpirun -np 1 "$B" eval fmnist-cnn --data synthetic --devices 2x11MiB --weights a.safetensors \
    : -np 1 "$B" eval fmnist-cnn --data synthetic --devices 2x11MiB --weights b.safetensors
# another --optimizer is named as such, not by the --lr its default brings
expect "--optimizer differing between ranks" 2 "the ranks disagree on --optimizer: rank 1 differs" \
    timeout 60 mpirun -np 1 "$B" $sbase --optimizer adam : -np 1 "$B" $sbase --optimizer sgd
# plan compares its command line as bench does (rank 0's plan alone was printed, another rank's batch unseen)
expect "plan --batch differing between ranks" 2 "brigade plan: the ranks disagree on the command line: rank 1" \
    timeout 60 mpirun -np 1 "$B" plan fmnist-cnn --devices 2x64MiB --batch 16 \
    : -np 1 "$B" plan fmnist-cnn --devices 2x64MiB --batch 32
# the same name holding other bytes on another rank (each node's own
# copy): refused by its contents (the ranks ran a mix of both files)
mkdir -p mpi-wd-g mpi-wd-h
"$B" model export fmnist-cnn --weights mpi-wd-g/w.safetensors --seed 1 -o mpi-wd-g/m.json >/dev/null
"$B" model export fmnist-cnn --weights mpi-wd-h/w.safetensors --seed 2 >/dev/null
sed 's/"rate": 0.25/"rate": 0.5/' mpi-wd-g/m.json >mpi-wd-h/m.json
expect "eval --weights of other contents" 2 "the ranks disagree on the contents of --weights: rank 1 differs" \
    timeout 60 mpirun -np 1 -wdir "$PWD/mpi-wd-g" "$B" eval fmnist-cnn --data synthetic --devices 2x11MiB \
    --weights w.safetensors : -np 1 -wdir "$PWD/mpi-wd-h" "$B" eval fmnist-cnn --data synthetic --devices 2x11MiB \
    --weights w.safetensors
expect "a model file of other contents" 2 "the ranks disagree on the contents of MODEL: rank 1 differs" \
    timeout 60 mpirun -np 1 -wdir "$PWD/mpi-wd-g" "$B" train m.json --data synthetic --devices 2x11MiB --limit 64 \
    --batch 32 : -np 1 -wdir "$PWD/mpi-wd-h" "$B" train m.json --data synthetic --devices 2x11MiB --limit 64 --batch 32
rm -rf mpi-wd-g mpi-wd-h
expect "bench --steps differing between ranks" 2 "the ranks disagree on the command line: rank 1 differs" \
    timeout 60 mpirun -np 1 "$B" bench fmnist-cnn --devices 2x64MiB --batch 8 --steps 2 \
    : -np 1 "$B" bench fmnist-cnn --devices 2x64MiB --batch 8 --steps 3
# Every rank warms up before the first step, whatever its devices: a
# replica on synchronous CPU devices that skipped it paired its first
# step's BatchNorm gathers with its cpu-async twin's warm-up and hung.
expect "--sync-bn replicas on cpu and cpu-async devices" 0 "measured = planned" \
    timeout 60 mpirun -np 2 "$B" train fmnist-cnn --data synthetic --devices cpu:11MiB,cpu-async:11MiB --limit 256 \
    --replicas 2 --sync-bn --microbatches 4
# cuda:local names each rank's own GPU: the list becomes every rank's.
expect "cuda:local:2x1GiB on 2 ranks plans 4 devices" 0 "on 4 devices, batch 64" \
    timeout 60 mpirun -np 2 "$B" plan fmnist-cnn --devices cuda:local:2x1GiB --batch 64
expect "cuda:local@12GiB on 2 ranks: one cards line for every rank's" 0 \
    "^cards: devices 0 to 1 (cuda:local), cards of 12.00 GiB, .*: 10.90 GiB each$" \
    timeout 60 mpirun -np 2 "$B" plan fmnist-cnn --devices cuda:local@12GiB --batch 64
if "$B" info 2>/dev/null | grep -q 'CUDA devices unavailable'; then
    expect "cuda:local without a GPU names the rank's GPU" 1 "rank 0: its cuda:local is GPU 0" \
        timeout 60 mpirun -np 2 "$B" train fmnist-cnn --data synthetic --devices cuda:local:64MiB --limit 256
fi
expect "bench: 3 devices on 2 ranks" 2 "give a multiple of 2 devices" \
    timeout 60 mpirun -np 2 "$B" bench fmnist-cnn --devices 3x64MiB --batch 8

# bench across 2 ranks: each rank runs its stage, rank 0 reports every
# stage (its bubble from the other rank's times too: a stage whose times
# did not arrive would be idle all step), with the peaks one process
# measures, and writes the traces.
bjob="bench fmnist-cnn --devices 2x64MiB --batch 8 --schedules 1f1b,zb-h1 --microbatches 4 --json"
rm -rf mpi-bench-traces
if timeout 120 mpirun -np 2 "$B" $bjob --trace mpi-bench-traces >mpi-bench.json 2>mpi-bench.err &&
    "$B" $bjob >one-bench.json 2>/dev/null; then
    peaks() { grep -o '"peak_measured_bytes": [0-9]*' "$1" | sort; } # the rows come best first
    idle=$(grep -o '"bubble_fraction": [0-9.e-]*' mpi-bench.json | awk '$2 >= 0.999' | wc -l)
    if grep -q '"processes": 2' mpi-bench.json && [ "$(peaks mpi-bench.json)" = "$(peaks one-bench.json)" ] &&
        [ "$idle" -eq 0 ] && [ -s mpi-bench-traces/zb-h1-m4.trace.json ] && [ -s mpi-bench-traces/1f1b-m4.svg ]; then
        echo "ok: bench on 2 ranks: every stage's times, the peaks of one process, the traces"
        rm -rf mpi-bench.json mpi-bench.err one-bench.json mpi-bench-traces
    else
        echo "FAIL: bench on 2 ranks (tests/mpi-bench.json; $idle stages idle all step; peaks $(peaks mpi-bench.json |
            tr '\n' ' ') against one process's $(peaks one-bench.json | tr '\n' ' '))"
        fails=$((fails + 1))
    fi
else
    echo "FAIL: bench on 2 ranks failed:"
    tail -8 mpi-bench.err | sed 's/^/  | /'
    fails=$((fails + 1))
fi

# Checkpoints across ranks: rank 0 writes what every rank holds, and every
# rank reads its own layers back. Two ranks (2 stages) write the same
# files, to the bit, as one process on 2 devices; 4 ranks (2 stages x 2
# replicas) resume from the middle of their run, one process on 3 devices
# from an earlier step, and each ends with the uninterrupted epoch lines;
# eval under mpirun scores the weights as one process does.
cjob="train fmnist-cnn --data synthetic --limit 1024 --batch 64 --epochs 3 --lr 0.001 --optimizer adam --seed 1 --deferred-bn"
epochs() { sed 's/\x1b\[K/\n/g' "$1" | tr '\r' '\n' | grep '^epoch [0-9]:' | sed 's/, [0-9.]* s (.*//'; }
rm -rf ckpt-mpi-one ckpt-mpi-two ckpt-mpi-four ckpt-mpi-back
"$B" $cjob --devices 2x11MiB --microbatches 8 --checkpoint ckpt-mpi-one >mpi-ckpt-one.log 2>&1
timeout 120 mpirun -np 2 "$B" $cjob --devices 2x11MiB --microbatches 8 --checkpoint ckpt-mpi-two \
    --checkpoint-every 8 --keep 10 >mpi-ckpt-two.log 2>&1
last=ckpt-mpi-one/step-0000000048
if epochs mpi-ckpt-one.log >mpi-ckpt-one.epochs && [ "$(wc -l <mpi-ckpt-one.epochs)" -eq 3 ] &&
    epochs mpi-ckpt-two.log | cmp -s - mpi-ckpt-one.epochs &&
    cmp -s $last/weights.safetensors ckpt-mpi-two/step-0000000048/weights.safetensors &&
    cmp -s $last/optimizer.safetensors ckpt-mpi-two/step-0000000048/optimizer.safetensors; then
    echo "ok: a checkpoint written by 2 ranks is one process's, to the bit"
else
    echo "FAIL: checkpoints of 2 ranks differ from one process's (tests/mpi-ckpt-*.log)"
    fails=$((fails + 1))
fi
# a fresh run into that folder is refused by rank 0, and every rank ends
# with its exit status
expect "a fresh run into a folder with checkpoints, on 2 ranks" 2 "holds checkpoints already" \
    timeout 60 mpirun -np 2 "$B" $cjob --devices 2x11MiB --microbatches 8 --checkpoint ckpt-mpi-two
mkdir -p ckpt-mpi-four ckpt-mpi-back
cp -r ckpt-mpi-two/step-0000000024 ckpt-mpi-four/
cp -r ckpt-mpi-two/step-0000000008 ckpt-mpi-back/
timeout 120 mpirun -np 4 "$B" $cjob --devices 4x11MiB --microbatches 4 --replicas 2 --resume ckpt-mpi-four \
    >mpi-ckpt-four.log 2>&1
"$B" $cjob --devices 3x11MiB --microbatches 8 --resume ckpt-mpi-back >mpi-ckpt-back.log 2>&1
if grep -q 'resume   from ckpt-mpi-four/step-0000000024' mpi-ckpt-four.log &&
    epochs mpi-ckpt-four.log | sed 's/ (resumed)//' | cmp -s - "$(sed -n 2,3p mpi-ckpt-one.epochs >mpi-ckpt-23.epochs &&
        echo mpi-ckpt-23.epochs)" &&
    epochs mpi-ckpt-back.log | sed 's/ (resumed)//' | cmp -s - mpi-ckpt-one.epochs; then
    echo "ok: resumed by 2 stages x 2 replicas and by one process, the epochs are the uninterrupted run's"
else
    echo "FAIL: resumed runs differ from the uninterrupted one (tests/mpi-ckpt-four.log, mpi-ckpt-back.log)"
    fails=$((fails + 1))
fi
# A signal to one rank in the evaluation (its pieces slowed by BRG_DEBUG_SLOW_EVAL) stops every rank after the same
# piece, within seconds and with no rank left waiting: train (2 stages x 2 replicas, the signal to replica 1's second
# stage) saves the epoch's last step, from which one process evaluates epoch 1 and ends with the uninterrupted epoch
# lines; eval says it stopped.
# stop_in_eval LOG RANKS VICTIM ARGS...: run brigade ARGS on RANKS ranks, SIGINT rank VICTIM once the evaluation has
# begun; sets rc and took (seconds from the signal to the job's end)
# wait_job SECONDS: wait for the mpirun job $mp, killed after SECONDS so
# that a hang fails instead of stalling the suite; rc is its exit status,
# took the seconds since $start
wait_job() {
    ( sleep "$1"; kill -9 "$mp" 2>/dev/null ) &
    watchdog=$!
    wait "$mp"
    rc=$?
    took=$(($(date +%s) - start))
    kill "$watchdog" 2>/dev/null
}
stop_in_eval() {
    log=$1 np=$2 victim_rank=$3
    shift 3
    BRG_DEBUG_SLOW_EVAL=3 "$MPIRUN" --oversubscribe -np "$np" "$B" "$@" >"$log" 2>&1 &
    mp=$!
    for _ in $(seq 1 600); do grep -q BRG_DEBUG_SLOW_EVAL "$log" && break; sleep 0.2; done
    start=$(date +%s)
    for p in $(pgrep -P "$mp"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -Eq "^(OMPI_COMM_WORLD_RANK|PMI_RANK)=$victim_rank\$" &&
            kill -INT "$p"
    done
    wait_job 60
}
rm -rf ckpt-mpi-eval
stop_in_eval mpi-eval-stop.log 4 3 $cjob --devices 4x11MiB --microbatches 4 --replicas 2 --checkpoint ckpt-mpi-eval
"$B" $cjob --devices 2x11MiB --microbatches 8 --resume ckpt-mpi-eval >mpi-eval-resume.log 2>&1
# (mpirun's exit status is its first rank's to end: the signalled rank's 130, or another's 143)
if { [ "$rc" -eq 130 ] || [ "$rc" -eq 143 ]; } && [ "$took" -le 10 ] &&
    grep -q "stopped by SIG[A-Z]* during epoch 1's evaluation" mpi-eval-stop.log &&
    ! grep -q "ending every rank" mpi-eval-stop.log &&
    grep -q 'resume   from ckpt-mpi-eval/step-0000000016: epoch 1, after step 16 of 16' mpi-eval-resume.log &&
    epochs mpi-eval-resume.log | sed 's/ (resumed)//' | cmp -s - mpi-ckpt-one.epochs; then
    echo "ok: train on 4 ranks, one signalled in the evaluation: all stopped in $took s, saved; resumed to the end"
    rm -f mpi-eval-stop.log mpi-eval-resume.log
else
    echo "FAIL: train on 4 ranks, one signalled in the evaluation: exit $rc in $took s, or the resume differs" \
        "(tests/mpi-eval-stop.log, mpi-eval-resume.log)"
    fails=$((fails + 1))
fi
stop_in_eval mpi-eval-stop.log 2 1 eval fmnist-cnn --data synthetic --limit 1024 --weights $last/weights.safetensors \
    --devices 2x11MiB
if { [ "$rc" -eq 130 ] || [ "$rc" -eq 143 ]; } && [ "$took" -le 10 ] &&
    grep -q "eval: stopped by SIG[A-Z]* during the evaluation" mpi-eval-stop.log &&
    ! grep -q "^eval " mpi-eval-stop.log && ! grep -q "ending every rank" mpi-eval-stop.log; then
    echo "ok: eval on 2 ranks, one signalled in the evaluation: every rank stopped in $took s"
    rm -f mpi-eval-stop.log
else
    echo "FAIL: eval on 2 ranks, one signalled in the evaluation: exit $rc in $took s (tests/mpi-eval-stop.log)"
    fails=$((fails + 1))
fi
one=$("$B" eval fmnist-cnn --data synthetic --limit 1024 --weights $last/weights.safetensors --devices 2x11MiB 2>&1 |
    grep '^eval' | sed 's/ ([0-9.]* s,.*//')
two=$(timeout 60 mpirun -np 2 "$B" eval fmnist-cnn --data synthetic --limit 1024 --weights $last/weights.safetensors \
    --devices 2x11MiB 2>&1 | grep '^eval' | sed 's/ ([0-9.]* s,.*//')
# The V-shapes put the last stage on device 0: its rank gathers the outputs.
vone=$("$B" eval fmnist-cnn --data synthetic --limit 1024 --weights $last/weights.safetensors --devices 2x11MiB \
    --schedule v-min 2>&1 | grep '^eval' | sed 's/ ([0-9.]* s,.*//')
vtwo=$(timeout 60 mpirun -np 2 "$B" eval fmnist-cnn --data synthetic --limit 1024 --weights $last/weights.safetensors \
    --devices 2x11MiB --schedule v-min 2>&1 | grep '^eval' | sed 's/ ([0-9.]* s,.*//')
if [ -n "$vone" ] && [ "$vone" = "$vtwo" ] && [ "$vone" = "$one" ]; then
    echo "ok: eval with v-min on 2 ranks: $vtwo"
else
    echo "FAIL: eval with v-min on 2 ranks said '$vtwo', one process '$vone', 1f1b '$one'"
    fails=$((fails + 1))
fi
if [ -n "$one" ] && [ "$one" = "$two" ]; then
    echo "ok: eval on 2 ranks: $two"
    rm -rf ckpt-mpi-* mpi-ckpt-*
else
    echo "FAIL: eval on 2 ranks said '$two', one process '$one'"
    fails=$((fails + 1))
fi

# A rank killed with SIGKILL mid-training ends the whole job within 10
# seconds, and mpirun names the rank and the signal. A rank stopped with
# SIGSTOP fails nothing: the others would wait for it for ever, and the
# watchdog (--watchdog 3) ends the job instead, saying why. Both on CPU
# devices and on cpu-async ones, whose messages wait on communicator
# streams (NCCL's twin) rather than in the workers; bench has the
# watchdog too.
stop_a_rank() { # what, signal, the line the job prints once under way (or ""), then the brigade arguments
    what=$1 sig=$2 started=$3
    shift 3
    "$MPIRUN" --oversubscribe -np 2 "$B" "$@" --watchdog 3 >mpi-$sig.log 2>&1 &
    mp=$!
    victim=""
    for _ in $(seq 1 100); do
        victim=$(pgrep -P "$mp" | sort -n | sed -n 2p)
        [ -n "$victim" ] && { [ -z "$started" ] || grep -q "$started" mpi-$sig.log; } && break
        sleep 0.2
    done
    sleep 2
    start=$(date +%s)
    [ -n "$victim" ] && kill -$sig "$victim"
    wait_job 30
    said='no progress for [0-9]* s\|no heartbeat from rank 1'
    [ $sig = KILL ] && said='rank 1 .*signal 9'
    limit=10
    log_verdict "$([ -n "$victim" ] && [ "$rc" -ne 0 ] && [ "$took" -le $limit ] && grep -q "$said" mpi-$sig.log &&
        echo y)" mpi-$sig.log \
        "$what, a rank stopped by SIG$sig: the job ended in $took s (exit $rc): $(grep -o "$said" mpi-$sig.log | head -n 1)" \
        "$what, after SIG$sig of a rank (pid ${victim:-none}) the job took $took s, exit $rc"
}
for devices in 2x24MiB cpu-async:2x24MiB; do
    for sig in KILL STOP; do
        stop_a_rank "$devices" $sig '^settings' \
            train fmnist-cnn --data synthetic --devices $devices --batch 64 --epochs 50
    done
done
stop_a_rank "bench on 2x24MiB" STOP '' \
    bench fmnist-cnn --devices 2x24MiB --batch 64 --schedules 1f1b --microbatches 4 --steps 100000
# In the setup (a big model's import, an image folder's scan) a waiting
# rank has no progress to show for up to an hour; the heartbeat tells a
# live slow rank (BRG_DEBUG_SLOW_SETUP: 6 s, past --watchdog 3) from a
# stopped one, which ends the job within 10 s, named (rank 0 listens to
# rank 1).
check "a setup slower than --watchdog is not taken for a stopped rank" env BRG_DEBUG_SLOW_SETUP=6 timeout 120 \
    mpirun -np 2 "$B" train fmnist-cnn --data synthetic --limit 256 --devices 2x24MiB --batch 64 --watchdog 3
export BRG_DEBUG_SLOW_SETUP=60
stop_a_rank "in the setup" STOP 'BRG_DEBUG_SLOW_SETUP' \
    train fmnist-cnn --data synthetic --limit 256 --devices 2x24MiB --batch 64
# The whole job stopped for 8 s and continued (Slurm's suspend) goes on:
# a rank whose own beat thread was stopped too does not judge the others.
export BRG_DEBUG_SLOW_SETUP=12
"$MPIRUN" --oversubscribe -np 2 "$B" train fmnist-cnn --data synthetic --limit 256 --devices 2x24MiB --batch 64 \
    >mpi-suspend.log 2>&1 &
mp=$!
for _ in $(seq 1 100); do grep -q BRG_DEBUG_SLOW_SETUP mpi-suspend.log && break; sleep 0.2; done
sleep 1
ranks=$(pgrep -P "$mp")
kill -STOP $ranks
sleep 8
kill -CONT $ranks
wait_job 60
log_verdict "$([ "$rc" -eq 0 ] && grep -q "^epoch 1:" mpi-suspend.log && echo y)" mpi-suspend.log \
    "every rank stopped for 8 s in the setup and continued: the job goes on" \
    "every rank stopped for 8 s and continued: exit $rc"
unset BRG_DEBUG_SLOW_SETUP

# A live rank hung in its setup (a stuck network file system) beats on, so only the setup's limit ends the job:
# rank 1's setup made 60 s slower (BRG_DEBUG_SLOW_SETUP, given to rank 1 alone by this wrapper: sh -c "$slow1" S
# brigade ARGS) ends train and bench within seconds with --watchdog-setup 3, the message naming the setup, the phase
# and the option; a setup slower than --watchdog 3 runs to the end within --watchdog-setup 10, and with 0 (no limit).
slow1='[ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}" = 1 ] && export BRG_DEBUG_SLOW_SETUP=$0; exec "$@"'
setup_limit() { # what, then the brigade arguments
    what=$1
    shift
    start=$(date +%s)
    "$MPIRUN" --oversubscribe -np 2 sh -c "$slow1" 60 "$B" "$@" --watchdog-setup 3 >mpi-setup.log 2>&1 &
    mp=$!
    wait_job 40
    # the phase of the rank that ended it: the hung one's (the start), or one that waits for it
    said='the setup is stuck: on this rank, [a-z ]* (its work, or a wait for other ranks) has not ended within 3 s, '
    said="${said}the most a setup phase may take: "
    said="$said.*raise --watchdog-setup S"
    log_verdict "$([ "$rc" -ne 0 ] && [ "$took" -le 12 ] && grep -q "$said" mpi-setup.log && echo y)" mpi-setup.log \
        "$what: rank 1 hung in the setup past --watchdog-setup 3: the job ended in $took s (exit $rc)" \
        "$what: rank 1 hung in the setup past --watchdog-setup 3: exit $rc in $took s"
}
setup_limit "train" train fmnist-cnn --data synthetic --limit 256 --devices 2x24MiB --batch 64
setup_limit "bench" bench fmnist-cnn --devices 2x24MiB --batch 64 --schedules 1f1b --microbatches 4 --steps 2
for s in 10 0; do
    check "rank 1's setup 6 s slower, past --watchdog 3, within --watchdog-setup $s: the run goes on" timeout 120 \
        mpirun -np 2 sh -c "$slow1" 6 "$B" train fmnist-cnn --data synthetic --limit 256 --devices 2x24MiB --batch 64 \
        --watchdog 3 --watchdog-setup $s
done

echo "$fails failed"
[ "$fails" -eq 0 ]

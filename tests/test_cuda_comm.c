/* NCCL communicators of CUDA devices (base/device-impl.h, backends/cuda/
 * nccl.c) between two processes on one GPU, without MPI: the test forks two
 * members, each with a virtual device of GPU 0; member 0 makes the id and
 * hands it to member 1 through a pipe. NCCL refuses two members of one host
 * on one GPU, so each names a host of its own (NCCL_HOSTID) and NCCL joins
 * them by its socket transport over the loopback, as two nodes.
 *
 * Member 0 sends messages of two pieces by the protocol of the pipeline's
 * channels between ranks (exec/transfer.c: its copy stream sends once its
 * compute stream has made them; member 1's communicator stream receives
 * into a slot once its compute stream has read the slot's last message,
 * its compute stream copies out after msg_ready), round after round with
 * member 0's compute stream moving on; then both sum their values on their
 * communicator streams after their compute streams' events. Before them, a
 * process of its own whose CUDA loads kernels lazily must be refused, and
 * a member whose peer never joins must give up after BRG_NCCL_JOIN_TIMEOUT
 * seconds, saying so, with nothing left behind (no CUDA error, the device
 * still working). After them, so must one
 * whose peer joins but never connects, its connecting call aborted.
 *
 * Exits 77 (skip) where no CUDA backend or NCCL is compiled in or no GPU is
 * visible. CUDA is touched only in the members: a forked child cannot use a
 * parent's CUDA context. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#if defined(BRG_HAVE_CUDA) && defined(BRG_HAVE_CUDNN) && defined(BRG_HAVE_NCCL)
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda-kernels.h"
#include "base/device-impl.h"

#define MiB ((size_t)1 << 20)
#define COUNT (3 << 18) /* floats per piece: 3 MiB, larger than NCCL's eager buffers */
#define ROUNDS 8

static brg_device *make(int vdev, int index)
{
    brg_device_spec spec = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .capacity = 256 * MiB, .vdev = vdev};
    brg_device *dev = NULL;
    CHECK_OK(brg_device_create(&spec, index, &dev));
    return dev;
}

static float value(int round, int i) { return (float)(round * 1000003 + i % 65536) * 0.5f; }

/* Member 0: the sender. Its pieces are allocated anew each round and
 * freed right after the send is queued: the next round's allocation gets
 * the same memory, which its compute stream may write only after the copy
 * stream's send has read it (brg_comm_send remembers the ranges, as
 * copy_async does). */
static void send_rounds(brg_device *dev, brg_comm *comm)
{
    const size_t bytes = COUNT * sizeof(float);
    float *host = malloc(2 * bytes);
    void *staged = NULL;
    brg_event *made = NULL;
    CHECK_OK(brg_device_alloc(dev, 2 * bytes, "staged", &staged));
    CHECK_OK(brg_event_create(dev, &made));
    for (int r = 0; r < ROUNDS && host && staged && made; r++) {
        void *x1 = NULL, *x2 = NULL;
        CHECK_OK(brg_device_alloc(dev, bytes, "first piece", &x1));
        CHECK_OK(brg_device_alloc(dev, bytes, "second piece", &x2));
        if (!x1 || !x2) break;
        for (int i = 0; i < 2 * COUNT; i++) host[i] = value(r, i);
        CHECK_OK(brg_device_copy_in(dev, staged, host, 2 * bytes));
        CHECK_OK(brg_device_copy_between(dev, x1, dev, staged, bytes)); /* the compute stream makes them */
        CHECK_OK(brg_device_copy_between(dev, x2, dev, (char *)staged + bytes, bytes));
        CHECK_OK(brg_event_record(made, BRG_STREAM_COMPUTE));
        CHECK_OK(brg_device_wait_event(dev, BRG_STREAM_COPY, made));
        void *pieces[2] = {x1, x2};
        const size_t sizes[2] = {bytes, bytes};
        CHECK_OK(brg_comm_send(comm, BRG_STREAM_COPY, 1, pieces, sizes, 2));
        CHECK_OK(brg_device_free(dev, x2));
        CHECK_OK(brg_device_free(dev, x1));
        CHECK_OK(brg_device_memset_zero(dev, staged, 2 * bytes)); /* the compute stream goes on at once */
    }
    CHECK_OK(brg_device_synchronize(dev));
    brg_event_destroy(made);
    if (staged) CHECK_OK(brg_device_free(dev, staged));
    free(host);
}

/* Member 1: the receiver, through one slot. */
static void receive_rounds(brg_device *dev, brg_comm *comm)
{
    const size_t bytes = COUNT * sizeof(float);
    float *back = malloc(2 * bytes);
    void *slot = NULL, *y = NULL;
    brg_event *msg_ready = NULL, *slot_free = NULL;
    CHECK_OK(brg_device_alloc(dev, 2 * bytes, "slot", &slot));
    CHECK_OK(brg_device_alloc(dev, 2 * bytes, "received", &y));
    CHECK_OK(brg_event_create(dev, &msg_ready));
    CHECK_OK(brg_event_create(dev, &slot_free));
    int wrong = 0;
    for (int r = 0; r < ROUNDS && back && slot && y && msg_ready && slot_free; r++) {
        void *into[2] = {slot, (char *)slot + bytes};
        const size_t sizes[2] = {bytes, bytes};
        CHECK_OK(brg_comm_wait_event(comm, slot_free));
        CHECK_OK(brg_comm_recv(comm, 0, into, sizes, 2));
        CHECK_OK(brg_comm_record_event(comm, msg_ready));
        CHECK_OK(brg_device_wait_event(dev, BRG_STREAM_COMPUTE, msg_ready));
        CHECK_OK(brg_device_copy_between(dev, y, dev, slot, 2 * bytes));
        CHECK_OK(brg_event_record(slot_free, BRG_STREAM_COMPUTE));
        CHECK_OK(brg_device_copy_out(dev, back, y, 2 * bytes));
        for (int i = 0; i < 2 * COUNT; i++)
            if (back[i] != value(r, i)) {
                wrong++;
                break;
            }
    }
    CHECK_MSG(wrong == 0, "%d of %d rounds received the wrong data", wrong, ROUNDS);
    brg_event_destroy(msg_ready);
    brg_event_destroy(slot_free);
    if (y) CHECK_OK(brg_device_free(dev, y));
    if (slot) CHECK_OK(brg_device_free(dev, slot));
    free(back);
}

/* Both: member m's values (m + 1) * i, summed: 3 * i. */
static void sum(brg_device *dev, brg_comm *comm, int m)
{
    const size_t n = (size_t)5 << 20;
    float *host = malloc(n * sizeof *host);
    void *staged = NULL, *v = NULL;
    brg_event *made = NULL, *summed = NULL;
    CHECK_OK(brg_device_alloc(dev, n * sizeof(float), "staged", &staged));
    CHECK_OK(brg_device_alloc(dev, n * sizeof(float), "values", &v));
    CHECK_OK(brg_event_create(dev, &made));
    CHECK_OK(brg_event_create(dev, &summed));
    if (host && staged && v && made && summed) {
        for (size_t i = 0; i < n; i++) host[i] = (float)(m + 1) * (float)(i % 4096);
        CHECK_OK(brg_device_copy_in(dev, staged, host, n * sizeof(float)));
        CHECK_OK(brg_device_copy_between(dev, v, dev, staged, n * sizeof(float)));
        CHECK_OK(brg_event_record(made, BRG_STREAM_COMPUTE));
        CHECK_OK(brg_comm_wait_event(comm, made));
        CHECK_OK(brg_comm_sum(comm, v, n));
        CHECK_OK(brg_comm_record_event(comm, summed));
        CHECK_OK(brg_device_wait_event(dev, BRG_STREAM_COMPUTE, summed));
        CHECK_OK(brg_device_copy_out(dev, host, v, n * sizeof(float)));
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += host[i] != 3.0f * (float)(i % 4096);
        CHECK_MSG(bad == 0, "member %d: %zu of %zu sums wrong", m, bad, n);
        /* A range outside the arena is refused before NCCL sees it. */
        CHECK_STATUS(brg_comm_sum(comm, host, 16), BRG_ERR_INVALID_ARGUMENT);
    }
    brg_event_destroy(made);
    brg_event_destroy(summed);
    if (v) CHECK_OK(brg_device_free(dev, v));
    if (staged) CHECK_OK(brg_device_free(dev, staged));
    free(host);
}

/* A process whose CUDA loads kernels lazily: its communicators of more
 * than one member are refused before NCCL is asked (so no peer is waited
 * for), whatever CUDA_MODULE_LOADING says once CUDA has started, since the
 * driver read it then. Its exit code. */
static int lazy_process(void)
{
    setenv("CUDA_MODULE_LOADING", "LAZY", 1);
    int gpus = 0;
    const int err = brg_cuda_device_count(&gpus);
    if (err != 0 || gpus == 0 || !brg_backend_available(BRG_BACKEND_CUDA)) {
        fprintf(stderr, "no GPU visible (%s): skipped\n", err ? brg_cuda_error_string(err) : "0 devices");
        return 77;
    }
    brg_device *dev = make(0, 0);
    if (!dev) TEST_EXIT();
    unsigned char id[BRG_COMM_ID_BYTES];
    brg_comm *comm = NULL;
    CHECK_OK(brg_comm_make_id(dev, id));
    CHECK(brg_cuda_lazy_loading() == 1);
    CHECK_STATUS(brg_comm_create(dev, id, 2, 0, BRG_COMM_MESSAGES, NULL, &comm), BRG_ERR_UNSUPPORTED);
    CHECK_ERROR_HAS("CUDA_MODULE_LOADING=LAZY");
    /* Too late: the driver keeps loading lazily. Asked only where the
     * driver can tell, since NCCL would otherwise wait for member 1. */
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    if (brg_cuda_lazy_loading() == 1) {
        CHECK_STATUS(brg_comm_create(dev, id, 2, 0, BRG_COMM_MESSAGES, NULL, &comm), BRG_ERR_UNSUPPORTED);
        CHECK_ERROR_HAS("set after CUDA had started");
    }
    brg_comm_destroy(comm);
    brg_device_destroy(dev);
    TEST_EXIT();
}

/* A member's setting, by NCCL's sockets over the loopback as a host of
 * its own, before CUDA starts. 1 when a GPU is there to run on. */
static int member_setting(const char *host, int quiet)
{
    setenv("NCCL_HOSTID", host, 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    setenv("NCCL_IB_DISABLE", "1", 0);
    setenv("NCCL_P2P_DISABLE", "1", 0);
    setenv("NCCL_SHM_DISABLE", "1", 0);
    int gpus = 0;
    /* Before CUDA starts (the GPU count starts it): without mpirun no
     * brg_world_init sets it, and communicators refuse lazy loading. */
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    const int err = brg_cuda_device_count(&gpus);
    if (err != 0 || gpus == 0 || !brg_backend_available(BRG_BACKEND_CUDA)) {
        if (!quiet) fprintf(stderr, "no GPU visible (%s): skipped\n", err ? brg_cuda_error_string(err) : "0 devices");
        return 0;
    }
    return 1;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* After a communicator gave up: no CUDA error is pending, and the device
 * still works, its context not poisoned (CUDA errors in a context are
 * sticky, and NCCL's error paths clear the last one): a ReLU of values
 * copied in gives what it should when copied back out. */
static void device_still_works(brg_device *dev, const char *after)
{
    const cudaError_t left = cudaPeekAtLastError();
    CHECK_MSG(left == cudaSuccess, "%s left %s as the last CUDA error", after, cudaGetErrorName(left));
    enum { N = 4096 };
    static float host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = (float)(i % 7) - 3.0f;
    void *p = NULL;
    CHECK_OK(brg_device_alloc(dev, N * sizeof(float), "after", &p));
    if (!p) return;
    brg_tensor x = brg_tensor_nchw(p, 1, 1, 1, N);
    x.device = dev;
    brg_op relu = {.kind = BRG_OP_RELU_FORWARD, .n_in = 1, .n_out = 1, .in = {&x}, .out = {&x}};
    CHECK_OK(brg_device_copy_in(dev, p, host, sizeof host));
    CHECK_OK(brg_device_run(dev, &relu));
    CHECK_OK(brg_device_copy_out(dev, back, p, sizeof back));
    CHECK_OK(brg_device_synchronize(dev));
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += back[i] != (host[i] > 0.0f ? host[i] : 0.0f);
    CHECK_MSG(wrong == 0, "%s, the device's ReLU got %d of %d values wrong", after, wrong, N);
    CHECK_OK(brg_device_free(dev, p));
}

/* Member 0 of two whose peer never joins: the join (nonblocking, nccl.c)
 * gives up after BRG_NCCL_JOIN_TIMEOUT seconds with a message that says
 * so, the communicator is aborted promptly (NCCL's bootstrap still waits
 * for member 1), and the device still works (device_still_works). Its
 * exit code. */
static int lonely_process(void)
{
    if (!member_setting("brigade-comm-lonely", 0)) return 77;
    setenv("BRG_NCCL_JOIN_TIMEOUT", "3", 1);
    brg_device *dev = make(0, 0);
    if (!dev) TEST_EXIT();
    unsigned char id[BRG_COMM_ID_BYTES];
    brg_comm *comm = NULL;
    CHECK_OK(brg_comm_make_id(dev, id));
    const double start = seconds_now();
    CHECK_STATUS(brg_comm_create(dev, id, 2, 0, BRG_COMM_MESSAGES, NULL, &comm), BRG_ERR_BACKEND);
    const double took = seconds_now() - start;
    CHECK_ERROR_HAS("did not join within that time");
    CHECK(comm == NULL);
    CHECK_MSG(took >= 2.5 && took < 30.0, "the join gave up after %.1f s, for a wait of 3 s", took);
    device_still_works(dev, "giving up the join");
    brg_device_destroy(dev);
    TEST_EXIT();
}

/* Two members, each in a process of its own under an alarm of alarm_s
 * seconds, running run(m, ends) over n_pipes pipes: member 0 gets the
 * write end of each, member 1 the read end. 77 when member 0 skipped,
 * 0 when both passed, else 1; what names the pair in the report. */
static int run_pair(const char *what, unsigned alarm_s, int n_pipes, int (*run)(int m, const int *ends))
{
    int pipes[2][2], ends[2];
    for (int k = 0; k < n_pipes; k++)
        if (pipe(pipes[k]) != 0) {
            perror("pipe");
            return 1;
        }
    pid_t pid[2];
    for (int m = 0; m < 2; m++) {
        fflush(NULL);
        pid[m] = fork();
        if (pid[m] < 0) {
            perror("fork");
            return 1;
        }
        if (pid[m] == 0) {
            signal(SIGPIPE, SIG_IGN);
            alarm(alarm_s);
            for (int k = 0; k < n_pipes; k++) {
                close(pipes[k][m == 0 ? 0 : 1]);
                ends[k] = pipes[k][m == 0 ? 1 : 0];
            }
            _exit(run(m, ends));
        }
    }
    for (int k = 0; k < n_pipes; k++) {
        close(pipes[k][0]);
        close(pipes[k][1]);
    }
    int codes[2] = {1, 1};
    for (int m = 0; m < 2; m++) {
        int status = 0;
        if (waitpid(pid[m], &status, 0) == pid[m] && WIFEXITED(status)) codes[m] = WEXITSTATUS(status);
        fprintf(stderr, "%smember %d: %s %d\n", what, m, WIFSIGNALED(status) ? "killed by signal" : "exit",
                WIFSIGNALED(status) ? WTERMSIG(status) : codes[m]);
        if (m == 0 && codes[0] != 0 && codes[0] != 77) kill(pid[1], SIGKILL); /* it might wait for member 0 */
    }
    if (codes[0] == 77) return 77;
    return codes[0] == 0 && codes[1] == 0 ? 0 : 1;
}

/* Two members of whom the second joins the communicator but never makes
 * its first call (it makes its member with the device's comm_create
 * alone): member 0's connect (comm_connect, as brg_comm_create calls it
 * after the join) gives up after BRG_NCCL_JOIN_TIMEOUT seconds, saying
 * so, and its communicator, whose connecting call NCCL's thread still
 * runs, is destroyed (aborted) promptly, the device still working. The join
 * itself is given a minute, as NCCL's setup may take seconds; only the
 * connect is given 3 s. Member 1 waits for member 0 to finish (its end of
 * `done` closes), then destroys its member. Their exit code. */
static int silent_member(int m, int id_fd, int done_fd)
{
    char host[32];
    snprintf(host, sizeof host, "brigade-comm-silent-%d", m);
    if (!member_setting(host, m != 0)) return 77;
    setenv("BRG_NCCL_JOIN_TIMEOUT", "60", 1);
    brg_device *dev = make(m, m);
    if (!dev) TEST_EXIT();
    unsigned char id[BRG_COMM_ID_BYTES];
    void *impl = NULL;
    if (m == 0) {
        CHECK_OK(brg_comm_make_id(dev, id));
        CHECK(write(id_fd, id, sizeof id) == (ssize_t)sizeof id);
        close(id_fd);
        CHECK_OK(dev->iface->comm_create(dev, id, 2, 0, NULL, &impl));
        if (impl) {
            setenv("BRG_NCCL_JOIN_TIMEOUT", "3", 1);
            const double start = seconds_now();
            CHECK_STATUS(dev->iface->comm_connect(dev, impl, 0, BRG_COMM_MESSAGES), BRG_ERR_BACKEND);
            CHECK_ERROR_HAS("connecting to the peer");
            CHECK_ERROR_HAS("did not join within that time");
            dev->iface->comm_destroy(dev, impl);
            const double took = seconds_now() - start;
            CHECK_MSG(took >= 2.5 && took < 30.0,
                      "the connect gave up and was destroyed after %.1f s, for a wait of 3 s", took);
            device_still_works(dev, "giving up the connect");
        }
        close(done_fd);
    } else {
        const int got = read(id_fd, id, sizeof id) == (ssize_t)sizeof id;
        CHECK(got);
        close(id_fd);
        if (got) CHECK_OK(dev->iface->comm_create(dev, id, 2, 1, NULL, &impl));
        char byte;
        while (read(done_fd, &byte, 1) > 0) continue; /* until member 0 is done */
        close(done_fd);
        if (impl) dev->iface->comm_destroy(dev, impl);
    }
    brg_device_destroy(dev);
    TEST_EXIT();
}

static int silent_ends(int m, const int *ends) { return silent_member(m, ends[0], ends[1]); }

static int silent_pair(void)
{
    return run_pair("silent pair, ", 60, 2, silent_ends); /* a connect that does not give up, or an abort that hangs */
}

/* One member's whole run in its own process: its exit code. */
static int member(int m, int id_fd)
{
    char host[32];
    snprintf(host, sizeof host, "brigade-comm-%d", m);
    if (!member_setting(host, m != 0)) return 77;
    brg_device *dev = make(m, m);
    unsigned char id[BRG_COMM_ID_BYTES];
    brg_comm *comm = NULL;
    if (dev) {
        CHECK(brg_device_has_comm(dev));
        if (m == 0) {
            CHECK_OK(brg_comm_make_id(dev, id));
            CHECK(write(id_fd, id, sizeof id) == (ssize_t)sizeof id);
        } else {
            CHECK(read(id_fd, id, sizeof id) == (ssize_t)sizeof id);
        }
        CHECK_OK(brg_comm_create(dev, id, 2, m, BRG_COMM_MESSAGES, NULL, &comm));
        /* Connecting polled the communicator's stream until the peer came:
         * no cudaErrorNotReady of those polls is left for the next kernel
         * launch's check to take for its own. */
        const cudaError_t left = cudaPeekAtLastError();
        CHECK_MSG(left == cudaSuccess, "member %d: making the communicator left %s as the last CUDA error", m,
                  cudaGetErrorName(left));
    }
    close(id_fd); /* a member 0 that failed first leaves member 1 an empty pipe: it stops too */
    if (comm) {
        if (m == 0) send_rounds(dev, comm);
        else receive_rounds(dev, comm);
        sum(dev, comm, m);
        CHECK_OK(brg_device_synchronize(dev));
    }
    brg_comm_destroy(comm);
    brg_device_destroy(dev);
    TEST_EXIT();
}

static int member_ends(int m, const int *ends) { return member(m, ends[0]); }
#endif

int main(void)
{
#if !defined(BRG_HAVE_CUDA) || !defined(BRG_HAVE_CUDNN) || !defined(BRG_HAVE_NCCL)
    fprintf(stderr, "CUDA backend with NCCL not compiled in: skipped\n");
    return 77;
#else
    /* The refusal of lazy loading first, in a process of its own. */
    fflush(NULL);
    pid_t lazy = fork();
    if (lazy < 0) {
        perror("fork");
        return 1;
    }
    if (lazy == 0) {
        alarm(120);
        _exit(lazy_process());
    }
    int lazy_status = 0;
    if (waitpid(lazy, &lazy_status, 0) != lazy || !WIFEXITED(lazy_status)) {
        fprintf(stderr, "the lazy-loading process did not exit normally\n");
        return 1;
    }
    if (WEXITSTATUS(lazy_status) == 77) return 77;
    if (WEXITSTATUS(lazy_status) != 0) {
        fprintf(stderr, "the lazy-loading process failed (exit %d)\n", WEXITSTATUS(lazy_status));
        return 1;
    }
    fflush(NULL);
    pid_t lonely = fork();
    if (lonely < 0) {
        perror("fork");
        return 1;
    }
    if (lonely == 0) {
        alarm(120); /* a join that does not give up fails */
        _exit(lonely_process());
    }
    int lonely_status = 0;
    const int lonely_waited = waitpid(lonely, &lonely_status, 0) == lonely;
    if (lonely_waited && WIFEXITED(lonely_status) && WEXITSTATUS(lonely_status) == 77) return 77;
    if (!lonely_waited || !WIFEXITED(lonely_status) || WEXITSTATUS(lonely_status) != 0) {
        fprintf(stderr, "the member whose peer never joins failed (%s %d)\n",
                WIFSIGNALED(lonely_status) ? "signal" : "exit",
                WIFSIGNALED(lonely_status) ? WTERMSIG(lonely_status) : WEXITSTATUS(lonely_status));
        return 1;
    }

    const int pair = run_pair("", 300, 1, member_ends); /* a member that waits for ever for the other one */
    if (pair == 77) return 77;
    /* Last, as a hang there (up to its alarm) must not cost the answers above. */
    const int silent = silent_pair();
    if (silent != 0 && silent != 77) fprintf(stderr, "the pair whose member 1 never connects failed\n");
    return pair == 0 && (silent == 0 || silent == 77) ? 0 : 1;
#endif
}

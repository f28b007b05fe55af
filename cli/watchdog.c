/* The watchdog of a job of several processes. A rank whose peer is
 * stopped or hung waits in MPI for ever: nothing fails, so nothing ends
 * the job. This thread ends it when the run has made no progress (a
 * step, an evaluation piece, a checkpoint, a measured step of bench) for
 * the longer of the limit and ten times the longest gap between two
 * pieces of progress so far, so that slow steps on a big model do not
 * trip it. It runs from the start of the command, so that a rank stopped
 * while the others plan or connect ends the job too; but a setup phase
 * (reading the model, the data, planning, making the pipeline, loading
 * weights: each begins with brg_cli_watchdog_phase) has no progress to
 * show on the ranks that wait for it, so each may take the setup's own
 * allowance (--watchdog-setup; by default the longer of the limit and
 * SETUP_WAIT). After brg_cli_watchdog_begin the wait for the first piece
 * is not a gap either: it holds the warm-up (the first step's allocations
 * and kernel choices), and ten times it would leave a hung rank alone for
 * long.
 *
 * A stopped or dead rank is told apart sooner, in the setup as after it:
 * every rank beats four times a second from a thread of its own
 * (brg_world_heartbeat_start, from main), whatever its other threads
 * are doing, and when the rank this one listens to has been silent for
 * BEAT_WAIT seconds (or the limit, if shorter) it is stopped, and the job
 * ends, naming it. What beats cannot see is a live rank that is hung:
 * that one still takes the limits above. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "brigade/distributed.h"
#include "cli.h"
#include "progress.h"

#define SETUP_WAIT 3600.0 /* seconds a setup phase may take without --watchdog-setup, or the limit if longer */
/* Seconds without a beat that mean a rank is stopped: 20 beats missed,
 * so a busy machine's scheduling does not trip it, and short enough that
 * with the 1 s tick and MPI_Abort every rank ends within 10 s. */
#define BEAT_WAIT 5.0

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct {
    pthread_t thread;
    int running, stop;
    const char *cmd;
    double limit, last, longest; /* seconds: the limit, the latest pet, the longest gap between pets */
    double setup_limit;          /* seconds a setup phase may take; 0: no limit */
    const char *phase;           /* the setup phase under way, for the message */
    int petted;                  /* whether a pet came since brg_cli_watchdog_begin */
    int setup;                   /* the setup's phases, before brg_cli_watchdog_begin */
} dog;

static void *watch(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!dog.stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&cv, &mu, &until);
        const double now = brg_progress_now(), gaps = 10.0 * dog.longest,
                     beat_allowed = dog.limit < BEAT_WAIT ? dog.limit : BEAT_WAIT;
        const double allowed = !dog.setup ? (dog.limit > gaps ? dog.limit : gaps)
                               : dog.setup_limit > 0.0 ? dog.setup_limit
                                                       : INFINITY; /* --watchdog-setup 0 */
        int quiet_rank = -1;
        const double quiet = brg_world_heartbeat_silence(brg_cli_world, &quiet_rank);
        if (dog.stop || (now - dog.last <= allowed && quiet <= beat_allowed)) continue;
        char msg[640];
        if (quiet > beat_allowed)
            snprintf(msg, sizeof msg,
                     "brigade %s: no heartbeat from rank %d for %.0f s (a live rank beats 4 times a second, "
                     "whatever it is doing): it is stopped (SIGSTOP, a debugger) or gone; ending every rank",
                     dog.cmd, quiet_rank, quiet);
        else if (dog.setup)
            snprintf(msg, sizeof msg,
                     "brigade %s: the setup is stuck: on this rank, %s (its work, or a wait for other ranks) has not "
                     "ended within %.0f s, the most a setup phase may take: a rank is hung (a stuck network file "
                     "system, a deadlock) or the phase needs longer (raise --watchdog-setup S, or 0 for no limit); "
                     "ending every rank",
                     dog.cmd, dog.phase, dog.setup_limit);
        else
            snprintf(msg, sizeof msg,
                     "brigade %s: no progress for %.0f s (no step, evaluation piece or checkpoint finished): "
                     "another rank is stopped or hung, or a step takes longer than --watchdog %.0f allows; "
                     "ending every rank",
                     dog.cmd, now - dog.last, dog.limit);
        pthread_mutex_unlock(&mu);
        brg_world_abort(brg_cli_world, BRG_EXIT_FAILURE, msg);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* BRG_DEBUG_SLOW_SETUP=S, for tests only: the setup of this rank (or of
 * the one process) takes S seconds more, as a big model's import or an
 * image folder's scan would, before its first phase ends
 * (tests/test_mpi.sh: such a rank must not end the job, and one stopped
 * meanwhile must, within seconds; test_cli_checkpoint.sh: a signal in
 * train's setup ends it there). A signal does not cut the wait short. */
static void slow_setup(const char *cmd)
{
    const char *s = getenv("BRG_DEBUG_SLOW_SETUP");
    const int seconds = s && *s ? atoi(s) : 0;
    if (seconds <= 0) return;
    fprintf(stderr, "brigade %s: BRG_DEBUG_SLOW_SETUP: the setup waits %d s\n", cmd, seconds);
    struct timespec left = {seconds, 0};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) continue;
}

static void start_thread(const char *cmd, double seconds, double setup_seconds)
{
    if (seconds <= 0.0 || brg_world_size(brg_cli_world) < 2 || dog.running) return;
    dog.cmd = cmd;
    dog.limit = seconds;
    /* Without --watchdog-setup, as before it: --watchdog only raises the hour. */
    dog.setup_limit = setup_seconds >= 0.0 ? setup_seconds : seconds > SETUP_WAIT ? seconds : SETUP_WAIT;
    dog.phase = "the start"; /* the options and the files they name, until the first phase */
    dog.last = brg_progress_now();
    dog.longest = 0.0;
    dog.petted = 0;
    dog.setup = 1;
    dog.stop = 0;
    dog.running = pthread_create(&dog.thread, NULL, watch, NULL) == 0;
    if (!dog.running) fprintf(stderr, "brigade %s: warning: cannot start the watchdog thread\n", cmd);
}

void brg_cli_watchdog_start(const char *cmd, double seconds, double setup_seconds)
{
    start_thread(cmd, seconds, setup_seconds);
    slow_setup(cmd);
}

int brg_cli_watchdog_parse(const char *cmd, const char *option, const char *text, int64_t *seconds)
{
    return brg_cli_parse_int(cmd, option, text, 0, 86400 * 7, seconds);
}

int brg_cli_watchdog_check(const char *cmd, int64_t seconds, int64_t setup_seconds)
{
    if (seconds != 0 || setup_seconds <= 0) return 1;
    brg_cli_usage_error(cmd, "--watchdog-setup %lld needs the watchdog, which --watchdog 0 turns off: drop "
                             "--watchdog 0, or --watchdog-setup", (long long)setup_seconds);
    return 0;
}

void brg_cli_watchdog_pet(void)
{
    if (!dog.running) return;
    pthread_mutex_lock(&mu);
    const double now = brg_progress_now();
    if (dog.petted && now - dog.last > dog.longest) dog.longest = now - dog.last;
    dog.petted = 1;
    dog.last = now;
    pthread_mutex_unlock(&mu);
}

void brg_cli_watchdog_phase(const char *name)
{
    if (!dog.running) return;
    pthread_mutex_lock(&mu);
    dog.last = brg_progress_now();
    dog.phase = name;
    pthread_mutex_unlock(&mu);
}

void brg_cli_watchdog_begin(void)
{
    if (!dog.running) return;
    pthread_mutex_lock(&mu);
    dog.last = brg_progress_now();
    dog.petted = 0;
    dog.setup = 0;
    pthread_mutex_unlock(&mu);
}

void brg_cli_watchdog_stop(void)
{
    if (!dog.running) return;
    pthread_mutex_lock(&mu);
    dog.stop = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(dog.thread, NULL);
    dog.running = 0;
}

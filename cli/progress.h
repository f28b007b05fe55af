/* brigade command line: the progress displays (training's, and a count
 * of files or samples: brg_count_progress, below).
 *
 * Training's: on a terminal, one line that rewrites itself in place (at most ten times
 * a second) with the epoch, step/steps, a bar, the running loss and
 * accuracy, the throughput, the share of time spent waiting for data and
 * every device's memory. Anywhere else (a
 * pipe, a log file) plain lines at every tenth of an epoch, so logs stay
 * readable. */
#ifndef BRIGADE_CLI_PROGRESS_H
#define BRIGADE_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct brg_progress {
    FILE *out;           /* where progress goes */
    int interactive;     /* 1: a terminal, one self-updating line */
    int epoch, epochs;
    int64_t steps;       /* steps in this epoch */
    int next_tenth;      /* plain mode: the next tenth of the epoch to report */
    double start;        /* seconds, monotonic, at the start of the epoch */
    double last_draw;    /* interactive: when the line was last drawn */
    int drawn;           /* interactive: a line is on screen */
} brg_progress;

/* What one update shows. */
typedef struct brg_progress_state {
    int64_t step;     /* steps done in this epoch, 1..steps */
    int64_t samples;  /* samples trained on in this epoch since it began or resumed (the rate) */
    double loss;      /* running mean loss over the epoch */
    double accuracy;  /* running accuracy over the epoch, 0..1 */
    int devices;      /* entries of mem_peak and mem_cap */
    const size_t *mem_peak; /* per device: highest use of its memory so far */
    const size_t *mem_cap;  /* per device: its capacity */
    double data_wait; /* fraction of the epoch's time spent waiting for batches, 0..1 */
} brg_progress_state;

/* Monotonic time in seconds. */
double brg_progress_now(void);

/* Choose the mode: a self-updating line on stderr when it is a terminal,
 * else on stdout when that is one, else plain lines on stdout. */
void brg_progress_init(brg_progress *p, int epochs);

/* Start epoch `epoch` (1-based) of `steps` steps. */
void brg_progress_begin_epoch(brg_progress *p, int epoch, int64_t steps);

/* Show the state after a step (throttled; the last step is always shown). */
void brg_progress_update(brg_progress *p, const brg_progress_state *s);

/* Remove the self-updating line before other output is printed. */
void brg_progress_clear(brg_progress *p);

/* Progress through a count (files written, masks read, test samples
 * evaluated): on a terminal (stderr), one line "DOING: DONE of COUNT
 * UNIT" rewritten at most ten times a second and cleared at the end;
 * elsewhere (a pipe, a log, under mpirun) nothing but the summary lines
 * the command prints anyway. */
typedef struct brg_count_progress {
    int on;      /* stderr is a terminal of this process's own */
    int drawn;   /* a line is on screen */
    double last; /* when it was drawn */
} brg_count_progress;

brg_count_progress brg_count_progress_start(void);
/* Drawn unless drawn less than a tenth of a second ago; done == count is
 * always drawn. */
void brg_count_progress_show(brg_count_progress *p, const char *doing, int64_t done, int64_t count,
                             const char *unit);
void brg_count_progress_clear(brg_count_progress *p);

#endif /* BRIGADE_CLI_PROGRESS_H */

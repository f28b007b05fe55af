/* brigade bench's own types (private to cli/cmd_bench.c and
 * cli/bench_report.c): the parsed command line, one combination's result,
 * and what every run of a combination shares. cmd_bench.c runs the
 * combinations; bench_report.c ranks them and prints the table, the JSON
 * and the progress lines. */
#ifndef BRIGADE_CLI_BENCH_H
#define BRIGADE_CLI_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"

#define MAX_LIST 32

typedef enum mode { MODE_MEASURED, MODE_SIMULATED, MODE_UNIT } mode;

typedef struct bench_args {
    const char *spec, *devices, *profile, *trace, *recompute;
    int64_t batch, chunks, steps, warmup, stages, seed, classes;
    int64_t watchdog; /* under mpirun: seconds without a measured step that end the job */
    int64_t watchdog_setup; /* --watchdog-setup: seconds the setup may take; -1: not given */
    brg_plan_options numbers; /* device and link speeds (brg_cli_plan_number) */
    double lr;
    int simulate, json;
    int speed_given;          /* --device-speed: the footer says the speed was given, not assumed */
    int trace_given;          /* --trace: every rank checks the sizes alike; rank 0 alone keeps `trace` */
    brg_schedule_kind kinds[MAX_LIST];
    int n_kinds;
    int64_t mbs[MAX_LIST];
    int n_mbs;
    brg_zoo_options zoo;
    int zoo_given;
} bench_args;

typedef struct stage_row {
    double bubble;          /* idle share of the step (mean over measured steps) */
    size_t peak_measured;   /* 0 when not measured */
    double copy_s, copy_hidden_s; /* measured: its sends' copy time per step, and how much of it was hidden */
    size_t peak_planned;    /* 0 in unit mode */
    size_t persistent, capacity;
    size_t budget;          /* the plan's capacity less headroom; 0 in unit mode */
    int fits;               /* the plan's stage fits (0 in unit mode: no plan) */
    size_t arena_bytes;     /* the plan's: the arena it needs when fragmentation is why it does not fit */
    char fit[80];           /* its mark (brg_cli_fit_marker): "" when it fits */
} stage_row;

typedef struct combo {
    brg_schedule_kind kind;
    int chunks, m;
    int fits;               /* planned within the capacities (always 1 in unit mode) */
    char *note;             /* why it does not fit, whole (plans' notes run long); NULL: none; run_bench frees it */
    char fit[80];           /* the mark of its first stage that does not fit ("" when it fits) */
    double samples_per_s;   /* measured, or batch / simulated makespan; 0 in unit mode */
    double makespan;        /* measured (mean step, actions only) or simulated; units in unit mode */
    double makespan_lo, makespan_hi; /* measured: the shortest and longest step's makespan */
    double makespan_median; /* measured: the median step's makespan (a slow spell of the machine
                             * lengthens the mean, as the profile's medians are not) */
    double step_s;          /* measured: mean wall time of a step, optimizer included */
    uint64_t host_bytes;    /* measured: bytes a step moved between host memory and the devices */
    double predicted;       /* the plan's simulated makespan (cost model or profile) */
    brg_plan_times times;   /* where the plan's times came from */
    double replayed;        /* measured: simulated makespan with this run's mean action times */
    double gflops;          /* measured: the plan's FLOPs over the computing time, per device */
    double bubble;          /* mean over stages */
    double analytic;        /* unit mode: the formula's bubble, or NAN where there is none */
    double peak_activations; /* the most micro-batches' activations a device holds at once, in
                                micro-batches of one stage (chunk ones count 1/chunks): 1F1B's p */
    stage_row *stages;      /* [p] */
    char *files[3];         /* traces written: chrome, svg, memory (NULL if none; run_bench frees them) */
} combo;

typedef struct run_ctx {
    const bench_args *a;
    mode md;
    int p;
    const brg_model *model;
    const brg_device_spec *specs;
    char **device_names;
    char title_prefix[256];
} run_ctx;

/* Its note, "" when it has none. */
const char *brg_bench_note(const combo *c);

/* Whether the combination has results to rank: it ran, or (simulated) was
 * partitioned even though it does not fit. */
int brg_bench_ranked(const combo *c, mode md);

/* "1f1b-m8", "interleaved-v2-m8": file names and progress lines. */
const char *brg_bench_combo_name(const combo *c, char *buf, size_t size);

/* The schedule as rows and titles show it: "1f1b", "interleaved (v=3)". */
const char *brg_bench_schedule_label(const combo *c, char *buf, size_t size);

/* Sort best first: runnable before not; unit costs by bubble, else by
 * samples/s. */
void brg_bench_rank(combo *cs, int n, mode md);

void brg_bench_print_table(const run_ctx *x, const combo *cs, int n);
void brg_bench_print_json(const run_ctx *x, const combo *cs, int n);

/* One line on stderr when combination i of n is done. */
void brg_bench_progress(const run_ctx *x, const combo *c, int i, int n);

#endif

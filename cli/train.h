/* brigade train's settings and its checkpoints (cmd_train.c runs the
 * training; train_checkpoint.c what a checkpoint records of the run, the
 * checks before a resume, and the signals that stop a run cleanly). */
#ifndef BRIGADE_CLI_TRAIN_H
#define BRIGADE_CLI_TRAIN_H

#include <stdint.h>

#include "cli.h"
#include "plan_print.h"

enum { DATA_NONE = 0, DATA_FASHION, DATA_SYNTHETIC };

typedef struct train_args {
    const char *spec;
    int data;
    const char *data_dir;
    const char *devices;
    int64_t epochs, batch, micro_batch, micro_batches, limit;
    brg_cli_plan_args plan;     /* the settings brigade plan takes too */
    int deferred_bn;
    double lr, momentum, weight_decay;
    int lr_given, momentum_given;
    int cosine;                 /* --lr-schedule cosine */
    int optimizer;
    uint64_t seed;
    brg_zoo_options zoo;
    int zoo_given;
    const char *init_weights;    /* --init-weights: a weights file to start from */
    const char *checkpoint_dir;  /* --checkpoint */
    int64_t checkpoint_every;    /* --checkpoint-every: steps; 0: at the end of each epoch only */
    int64_t keep;                /* --keep: newest checkpoints kept */
    const char *resume_dir;      /* --resume */
} train_args;

/* Where a run stands between two steps. */
typedef struct train_position {
    int64_t epoch;      /* the epoch under way, from 1 */
    int64_t epoch_step; /* its steps done */
    double loss_sum;    /* over those steps: loss x samples */
    int64_t correct, seen;
} train_position;

/* The checkpoint manifest's "run" object for a run at pos: the position
 * and the settings a continuation must share. JSON text to free, or NULL
 * when out of host memory. */
char *brg_train_run_json(const train_args *a, const train_position *pos);

/* Before resuming from the checkpoint at path whose "run" is run_json:
 * the settings must be this run's (the devices, schedule and micro-batches
 * may differ); fills pos. -1 to go on, else the exit code, with a message
 * naming what differs. */
int brg_train_resume_check(const train_args *a, const char *path, const char *run_json, train_position *pos);

/* SIGINT and SIGTERM while training: the first asks the run to stop after
 * its step (brg_train_stop_signal then says which), a second one exits at
 * once with 128 + its number. */
void brg_train_catch_signals(void);
int brg_train_stop_signal(void);

#endif

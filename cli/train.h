/* brigade train's settings and its checkpoints (cmd_train.c runs the
 * training; train_checkpoint.c what a checkpoint records of the run, the
 * checks before a resume, and the signals that stop a run cleanly). */
#ifndef BRIGADE_CLI_TRAIN_H
#define BRIGADE_CLI_TRAIN_H

#include <stdint.h>

#include "brigade.h"
#include "cli.h"
#include "plan_print.h"

enum { DATA_NONE = 0, DATA_FASHION, DATA_SYNTHETIC, DATA_FOLDER };

/* How image folders become samples (--val-split ... --bad-images). */
typedef struct image_args {
    double val_split;           /* 0: DIR/train and DIR/val */
    int val_split_given;        /* --val-split given (0 included: none) */
    int64_t resize;             /* 0: the transform's default */
    double mean[3], std[3];
    int n_mean, n_std;          /* values given (0: the defaults) */
    int no_flip;
    int64_t threads;            /* --data-threads; -1: the cores the devices leave free */
    int bad_fail;               /* --bad-images fail */
    int32_t ignore_label;       /* --ignore-label: the void of segmentation masks */
    int ignore_label_given;
} image_args;

typedef struct train_args {
    const char *spec;
    int data;
    const char *data_dir;       /* fashion-mnist: --data-dir */
    const char *data_path;      /* --data DIR */
    image_args images;
    const char *devices;
    int64_t epochs, batch, micro_batch, micro_batches, limit;
    int batch_given;
    brg_cli_plan_args plan;     /* the settings brigade plan takes too */
    int deferred_bn;
    double lr, momentum, weight_decay;
    int lr_given, momentum_given;
    int cosine;                 /* --lr-schedule cosine */
    int optimizer;
    uint64_t seed;
    int seed_given;
    brg_zoo_options zoo;
    int zoo_given;
    const char *init_weights;    /* --init-weights: a weights file to start from */
    const char *checkpoint_dir;  /* --checkpoint */
    int64_t checkpoint_every;    /* --checkpoint-every: steps; 0: at the end of each epoch only */
    int64_t keep;                /* --keep: newest checkpoints kept */
    const char *resume_dir;      /* --resume */
    int64_t watchdog;            /* --watchdog: seconds without progress that end a job of several processes */
    int64_t watchdog_setup;      /* --watchdog-setup: seconds a setup phase may take; -1: not given */
} train_args;

/* Where a run's samples come from (train_data.c): a data set in memory,
 * synthetic samples or image folders, each behind a loader that fills
 * batches ahead of the pipeline. */
typedef struct memory_source {
    const brg_dataset *ds;      /* NULL: synthetic */
    uint64_t seed;              /* synthetic */
    int64_t first;              /* synthetic: the index of sample 0 */
    int64_t sample;
    int classes;
} memory_source;

typedef struct train_data {
    char name[4200];            /* what the "data" line calls it */
    brg_dataset *train_ds, *test_ds;
    brg_image_folder *all, *train_folder, *test_folder;
    brg_seg_folder *seg_all, *seg_train, *seg_test; /* a segmentation folder */
    brg_image_source *train_images, *test_images;   /* either kind of folder */
    int64_t classes;            /* segmentation: classes per pixel */
    int32_t ignore_label;       /* segmentation: the masks' "no class" value */
    memory_source train_mem, test_mem;
    brg_sample_source train, test;
    int64_t train_count;        /* samples an epoch draws from (--limit) */
    int64_t *limit_map;         /* folders with --limit: training sample i is train[limit_map[i]] */
    brg_loader *train_loader, *test_loader;
    int threads, depth;
    int64_t batch;              /* the test loader's: --batch */
    int64_t train_batch;        /* the training loader's: --batch, or with replicas this rank's share */
    int64_t bad_shown[2];       /* bad files already warned about: training, test */
} train_data;

/* Open the data of a, checked against the model's input and output: a
 * segmentation folder needs per-pixel outputs [classes, H, W] at the
 * input's H x W, every other source class logits [classes, 1, 1]. Loaders
 * for batches of --batch (training: train_batch); -1 to go on, else the
 * exit code after a message. n_devices sets the default --data-threads. */
int brg_train_data_open(const char *cmd, const train_args *a, const brg_model *model, int n_devices,
                        int64_t train_batch, train_data *d);
/* The split layout of a folder of class folders: DIR/train and DIR/val
 * into train_dir and val_dir (size bytes each, made either way); 1 when
 * DIR/train is a folder (its held-out part then read from DIR/val only),
 * else 0 (DIR's own class folders). */
int brg_train_data_split_dirs(const char *dir, char *train_dir, char *val_dir, size_t size);
/* The name of a split's folder (val, validation, test) in dir, which has
 * no train/: its class folders would take it for a class. NULL if none. */
const char *brg_train_data_lone_split(const char *dir);
/* Whether a's --data is a segmentation folder (images/ and masks/ at DIR
 * or under DIR/train, and no IDX files). */
int brg_train_data_is_segmentation(const train_args *a);
/* Make the loaders again with their batches in dev's host memory for
 * copies (brg_device_host_alloc: pinned for a CUDA device, which then
 * copies them in without staging); before any pass. Free the data before
 * the device. -1 to go on, else the exit code after a message. */
int brg_train_data_pin(const char *cmd, train_data *d, brg_device *dev);
void brg_train_data_free(train_data *d);
/* The "data" line (and the classes of image folders) on stdout: for
 * training (evaluated < 0) its training and test samples, for eval only
 * the evaluated test samples (evaluated of d's, as
 * brg_train_data_start_test picks them). */
void brg_train_data_print(const train_data *d, int64_t evaluated);
/* Start the training pass of an epoch over order[0..n) (indices into the
 * epoch's training samples) from batch first. */
brg_status brg_train_data_start_epoch(train_data *d, int64_t *order, int64_t n, int64_t first, uint64_t seed);
/* Start a pass over count test samples (count <= d->test.count), the
 * loader taking those at positions order[0..n) of them (NULL: all count,
 * in order; order is changed). Image folders spread the count evenly
 * through folder order (eval's --limit, as training's: every class keeps
 * its share); other data takes the first count (synthetic test samples
 * are the training's by index). */
brg_status brg_train_data_start_test(train_data *d, int64_t *order, int64_t n, int64_t count);
/* Whether bad images were met that brg_train_data_report_bad has not
 * warned about yet (to clear a progress line first). */
int brg_train_data_new_bad(const train_data *d);
/* Warn on stderr once about each bad image met since the last call;
 * returns the reads that skipped one since then. */
int64_t brg_train_data_report_bad(const char *cmd, train_data *d);

/* Where a run stands between two steps. */
typedef struct train_position {
    int64_t epoch;      /* the epoch under way, from 1 */
    int64_t epoch_step; /* its steps done */
    double loss_sum;    /* over those steps: loss x counted labels */
    int64_t correct, seen;
    int64_t counted;    /* labels counted: samples, or pixels less the void */
} train_position;

/* The checkpoint manifest's "run" object for a run at pos: the position,
 * the length of its epochs, a class folder's class names, and the
 * settings a continuation must share. JSON text to free, or NULL
 * when out of host memory. */
char *brg_train_run_json(const train_args *a, const train_data *d, int64_t steps_per_epoch, const train_position *pos);

/* Before resuming from the checkpoint at path whose "run" is run_json:
 * the settings must be this run's (the devices, schedule and micro-batches
 * may differ), and so must the epochs' steps_per_epoch and the classes
 * of d (the same data);
 * fills pos. -1 to go on, else the exit code, with a message
 * naming what differs. */
int brg_train_resume_check(const train_args *a, const train_data *d, const char *path, const char *run_json,
                           int64_t steps_per_epoch, train_position *pos);

/* The weights file path given to option (--weights, --init-weights), checked
 * before anything is loaded: -1 when it is a file, else the exit code after a
 * message (1: it cannot be read; 2: a folder, with the weights file of the
 * checkpoint it holds, or is, when it is one). */
int brg_train_check_weights_file(const char *cmd, const char *option, const char *path);

/* The folder of the weights file weights into folder (size bytes): "."
 * for a bare name. */
void brg_train_weights_folder(const char *weights, char *folder, size_t size);

/* eval --weights W: when W is a checkpoint's (DIR/step-N/...), its
 * manifest read and checked into *m, *listed 1 (free it with
 * brg_checkpoint_manifest_free), once for the settings, the classes and
 * the load below; else *listed 0. -1 to go on, else the exit code after a
 * message naming the checkpoint. */
int brg_eval_read_checkpoint(const train_args *a, brg_checkpoint_manifest *m, int *listed);

/* eval with the weights of a checkpoint (its step-N/weights.safetensors,
 * m its manifest from brg_eval_read_checkpoint, NULL when not one's):
 * the settings that choose and shape its test samples default to the
 * training's, from the checkpoint's manifest: --resize, --mean, --std and
 * --ignore-label always, and for the same data --seed and --val-split too
 * (another seed would hold out another part, training images among it);
 * --batch when it is smaller than eval's (the training's fit its devices).
 * Says what it took, and warns where a given seed or split differs. -1 to
 * go on (also when the weights are not a checkpoint's), else the exit
 * code. */
int brg_eval_take_training_settings(train_args *a, const brg_checkpoint_manifest *m);

/* eval with a checkpoint's weights (m its manifest, or NULL) on class
 * folders: their classes must be those the training learnt, by name in
 * label order (the checkpoint's "classes"). -1 to go on (also when nothing
 * says what they were), else BRG_EXIT_USAGE after a message. */
int brg_eval_check_classes(const train_args *a, const train_data *d, const brg_checkpoint_manifest *m);

/* Under mpirun: every rank's settings of train or eval (cmd) are rank
 * 0's, those that make the plan included (a collective call); -1 to go
 * on, else the exit code, with a message on rank 0 naming the option that
 * differs. */
int brg_train_ranks_agree(const char *cmd, const train_args *a);

/* SIGINT, SIGTERM, SIGHUP and SIGPIPE while training (the last two unless
 * ignored when it starts): the first asks the run to stop after its step
 * (brg_train_stop_signal then says which, brg_train_signal_name names it);
 * then a SIGINT or SIGTERM exits at once with 128 + its number, saying
 * so, unless it is the first one again within a second (one press
 * delivered twice), and a SIGHUP or SIGPIPE is ignored. */
void brg_train_catch_signals(void);
int brg_train_stop_signal(void);
const char *brg_train_signal_name(int sig);

#endif

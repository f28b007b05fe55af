/* brigade train and eval: where the samples come from (train.h). Fashion-
 * MNIST or any IDX folder in memory, synthetic samples made from their
 * index, or image folders decoded on the fly (class folders, or
 * segmentation folders of images and masks); each behind a loader whose
 * threads fill batches ahead of the pipeline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train.h"

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* A data set in memory or synthetic samples, as a loader's source. */
static brg_status read_memory(void *ctx, int64_t index, uint64_t seed, float *image, int32_t *label)
{
    (void)seed;
    const memory_source *m = ctx;
    if (m->ds) return brg_dataset_batch(m->ds, index, 1, image, label);
    brg_cli_synth_sample(m->seed, (uint64_t)(m->first + index), m->sample, m->classes, image, label);
    return BRG_OK;
}

static void memory_samples(memory_source *m, int64_t count, brg_sample_source *out)
{
    out->count = count;
    out->sample_floats = m->sample;
    out->read = read_memory;
    out->ctx = m;
}

/* A folder holding IDX files in the MNIST layout. */
static int holds_idx(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    if (is_file(p)) return 1;
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir);
    return is_file(p);
}

static int fail(const char *cmd, const char *what, brg_status st)
{
    const int rc = brg_cli_fail(what, st);
    (void)cmd;
    return rc == BRG_EXIT_USAGE ? BRG_EXIT_FAILURE : rc;
}

/* Fashion-MNIST (or IDX files in dir): 1x28x28 in 10 classes. */
static int open_idx(const char *cmd, const train_args *a, const char *dir, const brg_model_tensor *in,
                    int64_t classes, train_data *d)
{
    if (in->c != 1 || in->h != BRG_FASHION_MNIST_SIDE || in->w != BRG_FASHION_MNIST_SIDE ||
        classes != BRG_FASHION_MNIST_CLASSES) {
        fprintf(stderr,
                "brigade %s: %s 1x28x28 images in 10 classes, but the model takes %lldx%lldx%lld and "
                "has %lld classes (for a zoo model: --input 1x28x28 --classes 10)\n", cmd,
                dir ? "IDX files in the MNIST layout hold" : "Fashion-MNIST has", (long long)in->c,
                (long long)in->h, (long long)in->w, (long long)classes);
        return BRG_EXIT_USAGE;
    }
    /* The image folders' options (cmd_train.c refuses them for the named
     * data sets) mean nothing here: an IDX folder holds its own test set. */
    const image_args *ia = &a->images;
    if (dir && (ia->val_split_given || ia->resize || ia->n_mean || ia->n_std || ia->no_flip || ia->bad_fail ||
                ia->ignore_label != BRG_SEG_IGNORE_LABEL)) {
        fprintf(stderr, "brigade %s: %s holds IDX files, whose t10k- files are the test set: --val-split, --resize, "
                        "--mean, --std, --no-flip, --bad-images and --ignore-label apply to folders of images\n",
                cmd, dir);
        return BRG_EXIT_USAGE;
    }
    brg_status st = brg_fashion_mnist_load(dir, BRG_SPLIT_TRAIN, &d->train_ds);
    if (st == BRG_OK) st = brg_fashion_mnist_load(dir, BRG_SPLIT_TEST, &d->test_ds);
    char what[64];
    /* The reader's message names the IDX file; a folder of the user's needs no other heading. */
    snprintf(what, sizeof what, "%s%s", cmd, dir ? "" : ": Fashion-MNIST");
    if (st != BRG_OK) return fail(cmd, what, st);
    d->train_mem.ds = d->train_ds;
    d->test_mem.ds = d->test_ds;
    d->train_count = a->limit && a->limit < d->train_ds->count ? a->limit : d->train_ds->count;
    memory_samples(&d->train_mem, d->train_ds->count, &d->train);
    memory_samples(&d->test_mem, d->test_ds->count, &d->test);
    if (dir) snprintf(d->name, sizeof d->name, "IDX files in %s", dir);
    else snprintf(d->name, sizeof d->name, "Fashion-MNIST");
    return -1;
}

/* The transform of --resize, --mean, --std, --no-flip for in (seg: a
 * segmentation folder's default resize). */
static int transform_of(const char *cmd, const image_args *ia, const brg_model_tensor *in, int train, int seg,
                        brg_image_transform *t)
{
    *t = seg ? brg_seg_transform_init((int)in->c, (int)in->h, (int)in->w)
             : brg_image_transform_init((int)in->c, (int)in->h, (int)in->w);
    if (ia->resize) t->resize = (int)ia->resize;
    const int side = in->h > in->w ? (int)in->h : (int)in->w;
    if (ia->resize && ia->resize < side) {
        fprintf(stderr, "brigade %s: --resize %lld is smaller than the model's %lldx%lld input: the crop would not "
                        "fit; give at least %d\n", cmd, (long long)ia->resize, (long long)in->h, (long long)in->w,
                side);
        return BRG_EXIT_USAGE;
    }
    for (int k = 0; k < 2; k++) {
        const int n = k ? ia->n_std : ia->n_mean;
        const double *v = k ? ia->std : ia->mean;
        if (!n) continue;
        if (n != 1 && n != in->c) {
            char give[48] = "give 1";
            if (in->c > 1) snprintf(give, sizeof give, "give 1 or %lld", (long long)in->c);
            fprintf(stderr, "brigade %s: --%s has %d values, but the model's input has %lld channel%s (%s)\n", cmd,
                    k ? "std" : "mean", n, (long long)in->c, in->c == 1 ? "" : "s", give);
            return BRG_EXIT_USAGE;
        }
        for (int c = 0; c < in->c; c++) (k ? t->std : t->mean)[c] = (float)v[n == 1 ? 0 : c];
    }
    t->random = train;
    t->flip = train && !ia->no_flip;
    return -1;
}

/* The classes of test must be those of train, by name: else the data is
 * refused (exit 2), as one whose class count is not the model's. */
static int same_classes(const char *cmd, const brg_image_folder *train, const brg_image_folder *test)
{
    const int n = brg_image_folder_classes(train), m = brg_image_folder_classes(test);
    for (int k = 0; k < n || k < m; k++) {
        const char *x = brg_image_folder_class_name(train, k), *y = brg_image_folder_class_name(test, k);
        if (x && y && strcmp(x, y) == 0) continue;
        fprintf(stderr,
                "brigade %s: the validation folder %s has other classes than the training folder %s: class %d is "
                "'%s' there and '%s' here; both need the same class folders\n", cmd, brg_image_folder_dir(test),
                brg_image_folder_dir(train), k, y ? y : "(none)", x ? x : "(none)");
        return BRG_EXIT_USAGE;
    }
    return -1;
}

/* Empty class folders and files that are not images: a warning each with
 * --bad-images skip, an error with fail. */
static int check_folder(const char *cmd, const image_args *ia, const brg_image_folder *f)
{
    char shown[BRG_CLI_SHOWN_PATH_MAX];
    for (int k = 0; k < brg_image_folder_classes(f); k++) {
        if (brg_image_folder_class_count(f, k)) continue;
        fprintf(stderr, "brigade %s: %s: the class folder %s/%s holds no images%s\n", cmd,
                ia->bad_fail ? "error" : "warning", brg_image_folder_dir(f),
                brg_cli_shown(brg_image_folder_class_name(f, k), shown, sizeof shown, NULL),
                ia->bad_fail ? " (--bad-images fail)" : "; its class keeps its number");
        if (ia->bad_fail) return BRG_EXIT_FAILURE;
    }
    const int64_t ignored = brg_image_folder_ignored_count(f);
    for (int64_t i = 0; i < ignored && (i < 5 || ia->bad_fail); i++) {
        const char *why = NULL, *path = brg_image_folder_ignored(f, i, &why);
        fprintf(stderr, "brigade %s: %s: %s: %s%s\n", cmd, ia->bad_fail ? "error" : "warning",
                brg_cli_shown(path, shown, sizeof shown, NULL), why,
                ia->bad_fail ? " (--bad-images fail)" : "; left out");
        if (ia->bad_fail) return BRG_EXIT_FAILURE;
    }
    if (ignored > 5) fprintf(stderr, "brigade %s: warning: %lld more files in %s are not samples; left out\n", cmd,
                             (long long)(ignored - 5), brg_image_folder_dir(f));
    if (brg_image_folder_count(f) == 0) {
        fprintf(stderr, "brigade %s: %s holds no .jpg, .jpeg or .png images in its class folders\n", cmd,
                brg_image_folder_dir(f));
        return BRG_EXIT_FAILURE;
    }
    return -1;
}

/* The loaders' view of d's image sources, and --limit: evenly through
 * folder order, so every class keeps its share. */
static int use_sources(const char *cmd, const train_args *a, train_data *d)
{
    d->train = *brg_image_source_samples(d->train_images);
    d->test = *brg_image_source_samples(d->test_images);
    d->train_count = d->train.count;
    if (a->limit && a->limit < d->train.count) {
        d->train_count = a->limit;
        d->limit_map = malloc((size_t)a->limit * sizeof *d->limit_map);
        if (!d->limit_map) return fail(cmd, cmd, BRG_ERR_HOST_MEMORY);
        for (int64_t i = 0; i < a->limit; i++) d->limit_map[i] = i * d->train.count / a->limit;
    }
    return -1;
}

/* Whether the model's input is one images can fill: -1 to go on, else
 * the exit code. */
static int image_channels(const char *cmd, const brg_model_tensor *in)
{
    if (in->c != 1 && in->c != 3) {
        fprintf(stderr, "brigade %s: the model takes %lld channels; images give 1 (grey) or 3 (RGB)\n", cmd,
                (long long)in->c);
        return BRG_EXIT_USAGE;
    }
    return -1;
}

int brg_train_data_split_dirs(const char *dir, char *train_dir, char *val_dir, size_t size)
{
    snprintf(train_dir, size, "%s/train", dir);
    snprintf(val_dir, size, "%s/val", dir);
    return is_dir(train_dir);
}

const char *brg_train_data_lone_split(const char *dir)
{
    static const char *const splits[] = {"val", "validation", "test"};
    for (int i = 0; i < 3; i++) {
        char split_dir[4300];
        snprintf(split_dir, sizeof split_dir, "%s/%s", dir, splits[i]);
        if (is_dir(split_dir)) return splits[i];
    }
    return NULL;
}

/* How a folder's images are cropped, for the data line: eval sees only
 * the test's crops. */
static const char *crops_text(const char *cmd, int flip)
{
    if (strcmp(cmd, "eval") == 0) return "centre crops";
    return flip ? "training: random crops and flips; test: centre crops" : "training: random crops; test: centre crops";
}

static int open_folders(const char *cmd, const train_args *a, const brg_model_tensor *in, int64_t classes,
                        train_data *d)
{
    const image_args *ia = &a->images;
    const char *dir = a->data_path;
    char train_dir[4200], val_dir[4200];
    const int pre = image_channels(cmd, in);
    if (pre >= 0) return pre;
    brg_status st;
    int rc;
    if (brg_train_data_split_dirs(dir, train_dir, val_dir, sizeof train_dir)) {
        if ((st = brg_image_folder_open(train_dir, &d->train_folder)) != BRG_OK) return fail(cmd, cmd, st);
        if (ia->val_split > 0.0) {
            d->all = d->train_folder;
            d->train_folder = NULL;
        } else if (is_dir(val_dir)) {
            if ((st = brg_image_folder_open(val_dir, &d->test_folder)) != BRG_OK) return fail(cmd, cmd, st);
        } else {
            fprintf(stderr, "brigade %s: %s has a train/ folder but no val/ beside it (a validation/ or test/ folder "
                            "is not read: name it val/); add one, or give --val-split F to hold out a fraction F of "
                            "train/ for validation\n", cmd, dir);
            return BRG_EXIT_USAGE;
        }
    } else {
        /* A split's folder without train/ would be taken for a class. */
        const char *lone = brg_train_data_lone_split(dir);
        if (lone) {
            fprintf(stderr, "brigade %s: %s has a %s/ folder but no train/ beside it, and its class folders would "
                            "take '%s' for a class; add train/ (and name the held-out part val/), or give %s/%s "
                            "itself with --val-split F\n", cmd, dir, lone, lone, dir, lone);
            return BRG_EXIT_USAGE;
        }
        if ((st = brg_image_folder_open(dir, &d->all)) != BRG_OK) return fail(cmd, cmd, st);
        if (ia->val_split <= 0.0) {
            fprintf(stderr, "brigade %s: %s holds class folders but no train/ and val/ folders; give --val-split F "
                            "to hold out a fraction F of each class for validation (e.g. --val-split 0.1)\n", cmd, dir);
            return BRG_EXIT_USAGE;
        }
    }
    if (d->all) {
        if ((rc = check_folder(cmd, ia, d->all)) >= 0) return rc;
        st = brg_image_folder_split(d->all, ia->val_split, brg_cli_mix64(a->seed ^ 0x53504c4954ULL), &d->train_folder,
                                    &d->test_folder);
        if (st != BRG_OK) return fail(cmd, cmd, st);
    } else {
        if ((rc = check_folder(cmd, ia, d->train_folder)) >= 0) return rc;
        if ((rc = check_folder(cmd, ia, d->test_folder)) >= 0) return rc;
        if ((rc = same_classes(cmd, d->train_folder, d->test_folder)) >= 0) return rc;
    }
    if (brg_image_folder_classes(d->train_folder) != classes) {
        fprintf(stderr, "brigade %s: %s has %d classes, but the model has %lld (for a zoo model: --classes %d)\n", cmd,
                dir, brg_image_folder_classes(d->train_folder), (long long)classes,
                brg_image_folder_classes(d->train_folder));
        return BRG_EXIT_USAGE;
    }
    if (brg_image_folder_count(d->test_folder) == 0) {
        fprintf(stderr, "brigade %s: no images are left for validation in %s%s\n", cmd,
                brg_image_folder_dir(d->test_folder), d->all ? "; give a larger --val-split" : "");
        return d->all ? BRG_EXIT_USAGE : BRG_EXIT_FAILURE; /* --val-split's, as too large a one is */
    }
    brg_image_transform tt, te;
    if ((rc = transform_of(cmd, ia, in, 1, 0, &tt)) >= 0) return rc;
    if ((rc = transform_of(cmd, ia, in, 0, 0, &te)) >= 0) return rc;
    if ((st = brg_image_source_create(d->train_folder, &tt, !ia->bad_fail, &d->train_images)) != BRG_OK ||
        (st = brg_image_source_create(d->test_folder, &te, !ia->bad_fail, &d->test_images)) != BRG_OK)
        return fail(cmd, cmd, st);
    if ((rc = use_sources(cmd, a, d)) >= 0) return rc;
    snprintf(d->name, sizeof d->name, "images in %s (%lldx%lld %s, shorter side to %d; %s)", dir, (long long)in->h,
             (long long)in->w, in->c == 1 ? "grey" : "RGB", tt.resize, crops_text(cmd, tt.flip));
    return -1;
}

/* The files a segmentation folder leaves out (images without masks, masks
 * without images, other files): a warning each (the first five) with
 * --bad-images skip, an error with fail; and no pair at all is an error. */
static int check_seg_folder(const char *cmd, const image_args *ia, const brg_seg_folder *f)
{
    const int64_t ignored = brg_seg_folder_ignored_count(f);
    char shown[BRG_CLI_SHOWN_PATH_MAX];
    for (int64_t i = 0; i < ignored && (i < 5 || ia->bad_fail); i++) {
        const char *why = NULL, *path = brg_seg_folder_ignored(f, i, &why);
        fprintf(stderr, "brigade %s: %s: %s: %s%s\n", cmd, ia->bad_fail ? "error" : "warning",
                brg_cli_shown(path, shown, sizeof shown, NULL), why,
                ia->bad_fail ? " (--bad-images fail)" : "; left out");
        if (ia->bad_fail) return BRG_EXIT_FAILURE;
    }
    if (ignored > 5)
        fprintf(stderr, "brigade %s: warning: %lld more files in %s are left out ('brigade data info' lists them)\n",
                cmd, (long long)(ignored - 5), brg_seg_folder_dir(f));
    if (brg_seg_folder_count(f) == 0) {
        fprintf(stderr, "brigade %s: %s holds no image with a mask (images/NAME.jpg or .png with masks/NAME.png)\n",
                cmd, brg_seg_folder_dir(f));
        return BRG_EXIT_FAILURE;
    }
    return -1;
}

/* A segmentation folder: DIR/images + DIR/masks split by --val-split, or
 * DIR/train/{images,masks} with DIR/val/{images,masks} (or --val-split). */
static int open_seg(const char *cmd, const train_args *a, const brg_model_tensor *in, int64_t classes,
                    train_data *d)
{
    const image_args *ia = &a->images;
    const char *dir = a->data_path;
    char train_dir[4200], val_dir[4200];
    const int pre = image_channels(cmd, in);
    if (pre >= 0) return pre;
    brg_train_data_split_dirs(dir, train_dir, val_dir, sizeof train_dir); /* the layout: brg_seg_folder_detect's */
    if (classes > 256) {
        fprintf(stderr, "brigade %s: the model has %lld classes per pixel; masks hold bytes, so at most 256\n", cmd,
                (long long)classes);
        return BRG_EXIT_USAGE;
    }
    if (ia->ignore_label < classes) {
        fprintf(stderr, "brigade %s: --ignore-label %d is one of the model's %lld classes (0..%lld); the ignore "
                        "label marks pixels of no class, so give one of %lld..255 (the default is 255)\n", cmd,
                (int)ia->ignore_label, (long long)classes, (long long)classes - 1, (long long)classes);
        return BRG_EXIT_USAGE;
    }
    brg_status st;
    int rc;
    if (brg_seg_folder_detect(dir) == 2) {
        if ((st = brg_seg_folder_open(train_dir, &d->seg_train)) != BRG_OK) return fail(cmd, cmd, st);
        if (ia->val_split > 0.0) {
            d->seg_all = d->seg_train;
            d->seg_train = NULL;
        } else if (brg_seg_folder_detect(val_dir) == 1) {
            if ((st = brg_seg_folder_open(val_dir, &d->seg_test)) != BRG_OK) return fail(cmd, cmd, st);
        } else {
            fprintf(stderr, "brigade %s: %s has train/images and train/masks but no val/images and val/masks beside "
                            "them; add them, or give --val-split F to hold out a fraction F of train/ for "
                            "validation\n", cmd, dir);
            return BRG_EXIT_USAGE;
        }
    } else {
        if ((st = brg_seg_folder_open(dir, &d->seg_all)) != BRG_OK) return fail(cmd, cmd, st);
        if (ia->val_split <= 0.0) {
            fprintf(stderr, "brigade %s: %s holds images/ and masks/ but no train/ and val/ folders; give "
                            "--val-split F to hold out a fraction F of the images for validation (e.g. "
                            "--val-split 0.1)\n", cmd, dir);
            return BRG_EXIT_USAGE;
        }
    }
    if (d->seg_all) {
        if ((rc = check_seg_folder(cmd, ia, d->seg_all)) >= 0) return rc;
        st = brg_seg_folder_split(d->seg_all, ia->val_split, brg_cli_mix64(a->seed ^ 0x53504c4954ULL), &d->seg_train,
                                  &d->seg_test);
        if (st != BRG_OK) return fail(cmd, cmd, st);
    } else {
        if ((rc = check_seg_folder(cmd, ia, d->seg_train)) >= 0) return rc;
        if ((rc = check_seg_folder(cmd, ia, d->seg_test)) >= 0) return rc;
    }
    if (brg_seg_folder_count(d->seg_test) == 0) {
        fprintf(stderr, "brigade %s: no images are left for validation in %s%s\n", cmd,
                brg_seg_folder_dir(d->seg_test), d->seg_all ? "; give a larger --val-split" : "");
        return d->seg_all ? BRG_EXIT_USAGE : BRG_EXIT_FAILURE;
    }
    brg_image_transform tt, te;
    if ((rc = transform_of(cmd, ia, in, 1, 1, &tt)) >= 0) return rc;
    if ((rc = transform_of(cmd, ia, in, 0, 1, &te)) >= 0) return rc;
    if ((st = brg_seg_source_create(d->seg_train, &tt, (int)classes, ia->ignore_label, !ia->bad_fail,
                                    &d->train_images)) != BRG_OK ||
        (st = brg_seg_source_create(d->seg_test, &te, (int)classes, ia->ignore_label, !ia->bad_fail,
                                    &d->test_images)) != BRG_OK)
        return fail(cmd, cmd, st);
    if ((rc = use_sources(cmd, a, d)) >= 0) return rc;
    d->classes = classes;
    d->ignore_label = ia->ignore_label;
    snprintf(d->name, sizeof d->name, "segmentation folder %s (%lldx%lld %s with masks, shorter side to %d; %s)", dir,
             (long long)in->h, (long long)in->w, in->c == 1 ? "grey" : "RGB", tt.resize, crops_text(cmd, tt.flip));
    return -1;
}

int brg_train_data_is_segmentation(const train_args *a)
{
    return a->data == DATA_FOLDER && !holds_idx(a->data_path) && brg_seg_folder_detect(a->data_path) != 0;
}

/* The model's output against the data: per-pixel [classes, H, W] at the
 * input's H x W for a segmentation folder, [classes, 1, 1] otherwise. */
static int check_output(const char *cmd, const train_args *a, const brg_model *model, int seg)
{
    const brg_model_tensor *in = brg_model_get_tensor(model, brg_model_input(model));
    const brg_model_tensor *out = brg_model_get_tensor(model, brg_model_output(model));
    const int per_pixel = out->h != 1 || out->w != 1;
    if (seg && !per_pixel) {
        fprintf(stderr, "brigade %s: %s is a segmentation folder (images/ and masks/), but model '%s' ends in class "
                        "logits [%lld, 1, 1]; masks need per-pixel outputs [classes, %lld, %lld] at the input's "
                        "size (e.g. the zoo's unet)\n", cmd, a->data_path, brg_model_name(model), (long long)out->c,
                (long long)in->h, (long long)in->w);
        return BRG_EXIT_USAGE;
    }
    if (seg && (out->h != in->h || out->w != in->w)) {
        fprintf(stderr, "brigade %s: model '%s' has per-pixel outputs [%lld, %lld, %lld] but takes %lldx%lld images; "
                        "masks label the input's pixels, so the output needs the input's height and width\n", cmd,
                brg_model_name(model), (long long)out->c, (long long)out->h, (long long)out->w, (long long)in->h,
                (long long)in->w);
        return BRG_EXIT_USAGE;
    }
    if (!seg && per_pixel) {
        char what[4400];
        if (a->data == DATA_FOLDER)
            snprintf(what, sizeof what, "--data DIR needs images/ and masks/ folders (DIR/images and DIR/masks, or "
                                        "DIR/train/images and DIR/train/masks), and %s has none", a->data_path);
        else
            snprintf(what, sizeof what, "--data %s gives one class per image; per-pixel labels come from a "
                                        "segmentation folder (--data DIR with images/ and masks/)",
                     a->data == DATA_FASHION ? "fashion-mnist" : "synthetic");
        fprintf(stderr, "brigade %s: model '%s' has per-pixel outputs [%lld, %lld, %lld]; %s\n", cmd,
                brg_model_name(model), (long long)out->c, (long long)out->h, (long long)out->w, what);
        return BRG_EXIT_USAGE;
    }
    return -1;
}

/* The training and test loaders, their batches in host_memory_of's memory
 * for copies (NULL: malloc). -1 to go on, else the exit code. */
static int make_loaders(const char *cmd, train_data *d, brg_device *host_memory_of)
{
    brg_loader_options o = {d->threads, d->depth, host_memory_of};
    brg_status st = brg_loader_create(&d->train, d->train_batch, &o, &d->train_loader);
    if (st == BRG_OK) st = brg_loader_create(&d->test, d->batch, &o, &d->test_loader);
    if (st != BRG_OK) return fail(cmd, cmd, st);
    return -1;
}

int brg_train_data_open(const char *cmd, const train_args *a, const brg_model *model, int n_devices,
                        int64_t train_batch, train_data *d)
{
    memset(d, 0, sizeof *d);
    const brg_model_tensor *in = brg_model_get_tensor(model, brg_model_input(model));
    const int64_t classes = brg_model_get_tensor(model, brg_model_output(model))->c;
    const int seg = brg_train_data_is_segmentation(a);
    int rc = check_output(cmd, a, model, seg);
    if (rc >= 0) return rc;
    const int64_t sample = in->c * in->h * in->w;
    d->train_mem.sample = d->test_mem.sample = sample;
    d->train_mem.classes = d->test_mem.classes = (int)classes;
    d->train_mem.seed = d->test_mem.seed = a->seed;
    if (a->data == DATA_FASHION) {
        rc = open_idx(cmd, a, a->data_dir, in, classes, d);
    } else if (a->data == DATA_FOLDER) {
        rc = holds_idx(a->data_path) ? open_idx(cmd, a, a->data_path, in, classes, d)
             : seg                   ? open_seg(cmd, a, in, classes, d)
                                     : open_folders(cmd, a, in, classes, d);
    } else {
        const int64_t n = a->limit ? a->limit : 1024;
        d->test_mem.first = INT64_C(1) << 40; /* other samples than the training ones */
        memory_samples(&d->train_mem, n, &d->train);
        memory_samples(&d->test_mem, n / 4 < 1 ? 1 : (n / 4 > 1000 ? 1000 : n / 4), &d->test);
        d->train_count = n;
        snprintf(d->name, sizeof d->name, "synthetic");
    }
    if (rc >= 0) return rc;
    /* The cores the devices leave free: one each for a device's worker. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    d->threads = a->images.threads >= 0 ? (int)a->images.threads
                                        : (cores - n_devices > 1 ? (int)(cores - n_devices) : 1);
    d->depth = 2;
    d->batch = a->batch;
    d->train_batch = train_batch;
    return make_loaders(cmd, d, NULL);
}

int brg_train_data_pin(const char *cmd, train_data *d, brg_device *dev)
{
    brg_loader_destroy(d->train_loader);
    brg_loader_destroy(d->test_loader);
    d->train_loader = d->test_loader = NULL;
    return make_loaders(cmd, d, dev);
}

void brg_train_data_free(train_data *d)
{
    brg_loader_destroy(d->train_loader);
    brg_loader_destroy(d->test_loader);
    brg_image_source_destroy(d->train_images);
    brg_image_source_destroy(d->test_images);
    brg_image_folder_destroy(d->train_folder);
    brg_image_folder_destroy(d->test_folder);
    brg_image_folder_destroy(d->all);
    brg_seg_folder_destroy(d->seg_train);
    brg_seg_folder_destroy(d->seg_test);
    brg_seg_folder_destroy(d->seg_all);
    brg_dataset_destroy(d->train_ds);
    brg_dataset_destroy(d->test_ds);
    free(d->limit_map);
    memset(d, 0, sizeof *d);
}

void brg_train_data_print(const train_data *d, int64_t evaluated)
{
    char b[32];
    if (evaluated < 0) {
        printf("data     %s: %lld training sample%s, %lld test sample%s\n", d->name, (long long)d->train_count,
               d->train_count == 1 ? "" : "s", (long long)d->test.count, d->test.count == 1 ? "" : "s");
    } else {
        /* eval reads no training sample: a split's other part is not its data */
        printf("data     %s: %lld", d->name, (long long)evaluated);
        if (evaluated < d->test.count) printf(" of %lld", (long long)d->test.count);
        printf(" test samples%s", evaluated < d->test.count ? " (--limit)" : "");
        if (d->all || d->seg_all)
            printf(", held out of its %lld by --val-split",
                   (long long)(d->all ? brg_image_folder_count(d->all) : brg_seg_folder_count(d->seg_all)));
        printf("\n");
    }
    if (d->train_folder) {
        const brg_image_folder *f = d->train_folder;
        const int n = brg_image_folder_classes(f);
        printf("classes  %d:", n);
        int col = 17;
        for (int k = 0; k < n; k++) {
            char item[300], train[32] = "";
            if (evaluated < 0) snprintf(train, sizeof train, "%lld+", (long long)brg_image_folder_class_count(f, k));
            const int len = snprintf(item, sizeof item, " %s (%s%lld)%s", brg_image_folder_class_name(f, k), train,
                                     (long long)brg_image_folder_class_count(d->test_folder, k), k + 1 < n ? "," : "");
            if (col + len > 100) {
                printf("\n        ");
                col = 8;
            }
            fputs(item, stdout);
            col += len;
        }
        printf("  (%s images)\n", evaluated < 0 ? "training+validation" : "validation");
    }
    if (d->seg_train)
        printf("masks    %lld classes per pixel (0..%lld), ignore label %d; resized by nearest neighbour\n",
               (long long)d->classes, (long long)d->classes - 1, (int)d->ignore_label);
    printf("loader   %d thread%s, %d batches ahead: %s of host memory\n", d->threads, d->threads == 1 ? "" : "s",
           d->threads ? d->depth : 0,
           brg_format_bytes(brg_loader_host_bytes(d->train_loader) + brg_loader_host_bytes(d->test_loader), b,
                            sizeof b));
}

brg_status brg_train_data_start_epoch(train_data *d, int64_t *order, int64_t n, int64_t first, uint64_t seed)
{
    if (d->limit_map)
        for (int64_t i = 0; i < n; i++) order[i] = d->limit_map[order[i]];
    return brg_loader_start(d->train_loader, order, n, first, seed);
}

brg_status brg_train_data_start_test(train_data *d, int64_t *order, int64_t n, int64_t count)
{
    if (order && d->test_images && count < d->test.count)
        for (int64_t i = 0; i < n; i++) order[i] = order[i] * d->test.count / count;
    return brg_loader_start(d->test_loader, order, n, 0, 0);
}

int brg_train_data_new_bad(const train_data *d)
{
    return (d->train_images && brg_image_source_bad_count(d->train_images) > d->bad_shown[0]) ||
           (d->test_images && brg_image_source_bad_count(d->test_images) > d->bad_shown[1]);
}

int64_t brg_train_data_report_bad(const char *cmd, train_data *d)
{
    int64_t skipped = 0;
    brg_image_source *sources[2] = {d->train_images, d->test_images};
    for (int s = 0; s < 2; s++) {
        if (!sources[s]) continue;
        skipped += brg_image_source_take_skipped(sources[s]);
        const int64_t n = brg_image_source_bad_count(sources[s]);
        for (int64_t k = d->bad_shown[s]; k < n; k++) {
            char path[4200], why[1024];
            if (brg_image_source_bad(sources[s], k, path, sizeof path, why, sizeof why) == BRG_OK)
                fprintf(stderr, "brigade %s: warning: skipped a bad %s: %s\n", cmd,
                        d->seg_train ? "image or mask" : "image", why);
        }
        d->bad_shown[s] = n;
    }
    return skipped;
}

/* What a checkpoint records of a brigade train run, the checks before a
 * resume, and the signals that stop a run cleanly (train.h). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "train.h"

/* ---- the run's settings ---- */

static const char *data_name(const train_args *a)
{
    return a->data == DATA_FASHION ? "fashion-mnist" : a->data == DATA_FOLDER ? a->data_path : "synthetic";
}

/* A per-channel setting as given ("" when not: the default). */
static json_t *channels_json(const double *v, int n)
{
    char text[96] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof text; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%.9g", i ? "," : "", v[i]);
    return json_string(text);
}

/* A path as a JSON string: as it is when it is UTF-8 (JSON's only
 * encoding), else with each byte that is not ASCII as \xNN. */
static json_t *path_json(const char *path)
{
    json_t *j = json_string(path);
    if (j) return j;
    char text[4 * PATH_MAX + 1];
    size_t at = 0;
    for (const unsigned char *c = (const unsigned char *)path; *c && at + 5 < sizeof text; c++)
        at += (size_t)snprintf(text + at, sizeof text - at, *c < 0x80 ? "%c" : "\\x%02x", *c);
    return json_string(text);
}

/* The settings a continuation must share, as the options name them. An
 * image folder's adds how its images become samples (the data-threads
 * and bad-images choices change no sample), a segmentation folder's the
 * ignore label too. */
static json_t *settings_json(const train_args *a)
{
    json_t *s = json_pack("{s:o, s:I, s:I, s:I, s:f, s:s, s:s, s:f, s:f, s:I, s:b}", "data",
                          path_json(data_name(a)), "limit", (json_int_t)a->limit, "epochs", (json_int_t)a->epochs,
                          "batch", (json_int_t)a->batch, "lr", a->lr, "lr-schedule", a->cosine ? "cosine" : "constant",
                          "optimizer", brg_optimizer_name((brg_optimizer_kind)a->optimizer), "momentum", a->momentum,
                          "weight-decay", a->weight_decay, "seed", (json_int_t)a->seed, "deferred-bn", a->deferred_bn);
    if (s && a->data == DATA_FOLDER) {
        const image_args *ia = &a->images;
        json_object_set_new(s, "val-split", json_real(ia->val_split));
        json_object_set_new(s, "resize", json_integer(ia->resize));
        json_object_set_new(s, "mean", channels_json(ia->mean, ia->n_mean));
        json_object_set_new(s, "std", channels_json(ia->std, ia->n_std));
        json_object_set_new(s, "no-flip", json_boolean(ia->no_flip));
        if (brg_train_data_is_segmentation(a)) json_object_set_new(s, "ignore-label", json_integer(ia->ignore_label));
    }
    return s;
}

/* A classification folder's class names in label order (the folders'
 * sorted names), or NULL for other data (or names that are not UTF-8). */
static json_t *classes_json(const train_data *d)
{
    if (!d || !d->train_folder) return NULL;
    json_t *names = json_array();
    for (int k = 0; names && k < brg_image_folder_classes(d->train_folder); k++)
        if (json_array_append_new(names, json_string(brg_image_folder_class_name(d->train_folder, k))) != 0) {
            json_decref(names);
            names = NULL;
        }
    return names;
}

char *brg_train_run_json(const train_args *a, const train_data *d, int64_t steps_per_epoch, const train_position *pos)
{
    json_t *run = json_pack("{s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:o}", "epoch", (json_int_t)pos->epoch,
                            "epoch_step", (json_int_t)pos->epoch_step, "steps_per_epoch", (json_int_t)steps_per_epoch,
                            "epoch_loss_sum", pos->loss_sum, "epoch_correct", (json_int_t)pos->correct, "epoch_seen",
                            (json_int_t)pos->seen, "epoch_counted", (json_int_t)pos->counted, "settings",
                            settings_json(a));
    /* The samples an epoch shuffles: images added or removed, fewer than
     * a batch, leave the epoch's length as it was but change its order. */
    if (run) json_object_set_new(run, "train_samples", json_integer((json_int_t)d->train_count));
    json_t *classes = classes_json(d);
    if (run && classes) json_object_set(run, "classes", classes);
    json_decref(classes);
    /* The folder resolved, beside the settings (which keep it as given):
     * eval or a resume from another working folder recognizes it. */
    if (run && a->data == DATA_FOLDER) {
        char real[PATH_MAX];
        brg_cli_resolve_path(a->data_path, real, sizeof real);
        json_object_set_new(run, "data_resolved", path_json(real));
    }
    /* Reals print with 17 digits: they read back to the same double, so a
     * resumed epoch's line equals an uninterrupted one's. */
    char *text = run ? json_dumps(run, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(run);
    return text;
}

static json_t *string_or_null(const char *text) { return text ? path_json(text) : json_null(); }

/* "0.5,0.5,0.5" into v[0..3): the count, 0 for "" or a bad text. */
static int channels_of(const char *text, double *v)
{
    int n = 0;
    for (const char *p = text; *p && n < 3; n++) {
        char *end;
        v[n] = strtod(p, &end);
        if (end == p || (*end && *end != ',')) return 0;
        p = *end ? end + 1 : end;
    }
    return n;
}

/* Add "--name value" to the list of settings taken. */
static void took(char *list, size_t size, const char *name, const char *value)
{
    const size_t at = strlen(list);
    snprintf(list + at, size - at, "%s--%s %s", at ? " " : "", name, value);
}

/* Whether folder is the one a checkpoint's run read: given as it
 * recorded it, or its resolved path ("data_resolved"). */
static int same_folder(const char *folder, const char *recorded, json_t *run)
{
    const char *resolved = json_string_value(json_object_get(run, "data_resolved"));
    return brg_cli_same_path(folder, recorded) || (resolved && brg_cli_same_path(folder, resolved));
}

void brg_train_weights_folder(const char *weights, char *folder, size_t size)
{
    snprintf(folder, size, "%s", weights);
    char *slash = strrchr(folder, '/');
    if (slash) *slash = '\0';
    else snprintf(folder, size, ".");
}

int brg_train_check_weights_file(const char *cmd, const char *option, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "brigade %s: %s: cannot read %s: %s\n", cmd, option, path, strerror(errno));
        return BRG_EXIT_FAILURE;
    }
    if (S_ISREG(sb.st_mode)) return -1;
    /* A checkpoint's folder, or the folder of a run's checkpoints, is a
     * likely slip: name the file meant. */
    char file[4200] = "";
    if (S_ISDIR(sb.st_mode)) {
        int n = (int)strlen(path), count = 0;
        while (n > 1 && path[n - 1] == '/') n--;
        int64_t newest = -1;
        snprintf(file, sizeof file, "%.*s/weights.safetensors", n, path);
        if (stat(file, &sb) != 0) {
            file[0] = '\0';
            if (brg_checkpoint_count(path, &count, &newest) == BRG_OK && count > 0)
                snprintf(file, sizeof file, "%.*s/step-%010lld/weights.safetensors", n, path, (long long)newest);
        }
    }
    if (file[0])
        fprintf(stderr, "brigade %s: %s: %s is a checkpoint's folder; give its weights file: %s %s\n", cmd, option,
                path, option, file);
    else
        fprintf(stderr, "brigade %s: %s: %s is not a file; give a safetensors file of weights\n", cmd, option, path);
    return BRG_EXIT_USAGE;
}

/* The "run" of the checkpoint manifest m; NULL when m is NULL (weights
 * that are not a checkpoint's). */
static json_t *training_run(const brg_checkpoint_manifest *m)
{
    return m ? json_loads(m->run_json, 0, NULL) : NULL;
}

int brg_eval_read_checkpoint(const train_args *a, brg_checkpoint_manifest *m, int *listed)
{
    memset(m, 0, sizeof *m);
    *listed = 0;
    if (!a->init_weights || !brg_checkpoint_contains(a->init_weights)) return -1;
    char folder[4200];
    brg_train_weights_folder(a->init_weights, folder, sizeof folder);
    if (brg_checkpoint_read_manifest(folder, m) != BRG_OK) {
        /* Loading its weights checks them against that manifest too: one
         * refusal now rather than a warning and a failure after planning. */
        fprintf(stderr, "brigade eval: --weights: the checkpoint %s cannot be used: %s; give another checkpoint's "
                        "weights, or a copy of the file outside its folder to evaluate it without the manifest's "
                        "checks\n", folder, brg_last_error());
        return BRG_EXIT_FAILURE;
    }
    *listed = 1;
    return -1;
}

int brg_eval_check_classes(const train_args *a, const train_data *d, const brg_checkpoint_manifest *m)
{
    char folder[4200];
    brg_train_weights_folder(a->init_weights, folder, sizeof folder);
    json_t *run = training_run(m);
    json_t *theirs = json_object_get(run, "classes"), *mine = classes_json(d);
    int rc = -1;
    if (json_is_array(theirs) && mine && !json_equal(theirs, mine)) {
        char *was = json_dumps(theirs, JSON_COMPACT), *is = json_dumps(mine, JSON_COMPACT);
        fprintf(stderr,
                "brigade eval: the training of %s learnt the classes %s (in label order), --data %s has %s: each "
                "label would mean another class than the weights learnt; give a folder of the training's classes\n",
                folder, was ? was : "(unknown)", a->data_path, is ? is : "(unknown)");
        free(was);
        free(is);
        rc = BRG_EXIT_USAGE;
    }
    json_decref(mine);
    json_decref(run);
    return rc;
}

int brg_eval_take_training_settings(train_args *a, const brg_checkpoint_manifest *m)
{
    char folder[4200];
    brg_train_weights_folder(a->init_weights, folder, sizeof folder);
    json_t *run = training_run(m);
    if (!run) return -1;
    json_t *s = json_object_get(run, "settings");
    const char *data = json_string_value(json_object_get(s, "data"));
    const int same_data = data && (a->data == DATA_FOLDER ? same_folder(a->data_path, data, run)
                                                          : strcmp(data_name(a), data) == 0);
    image_args *ia = &a->images;
    char list[512] = "", text[96];
    json_t *v;
    if (same_data && json_is_integer(v = json_object_get(s, "seed"))) {
        /* The seed chooses the part a split holds out, and synthetic test
         * samples (never the training's: those of another index range). */
        const uint64_t seed = (uint64_t)json_integer_value(v);
        const double split = json_number_value(json_object_get(s, "val-split"));
        const int splits = a->data == DATA_FOLDER && (ia->val_split_given ? ia->val_split > 0.0 : split > 0.0);
        if (!a->seed_given && seed != a->seed && (splits || a->data == DATA_SYNTHETIC)) {
            a->seed = seed;
            snprintf(text, sizeof text, "%llu", (unsigned long long)seed);
            took(list, sizeof list, "seed", text);
        } else if (seed != a->seed && splits && split > 0.0) {
            fprintf(stderr, "brigade eval: warning: --seed %llu is not the training's (%llu): the part --val-split "
                            "holds out is not the one it held out, and may include its training samples\n",
                    (unsigned long long)a->seed, (unsigned long long)seed);
        }
        if (a->data == DATA_FOLDER && split > 0.0 && !ia->val_split_given) {
            ia->val_split = split;
            snprintf(text, sizeof text, "%g", split);
            took(list, sizeof list, "val-split", text);
        } else if (a->data == DATA_FOLDER && split > 0.0 && ia->val_split > 0.0 && ia->val_split != split) {
            fprintf(stderr, "brigade eval: warning: --val-split %g is not the training's (%g): the part held out is "
                            "not the one it held out, and may include its training samples\n", ia->val_split, split);
        }
    }
    /* The training's batch fit its devices (per replica: a smaller one
     * then); taken only when smaller than eval's, and not with
     * micro-batches given, which were counted against --batch. */
    const json_int_t batch = json_integer_value(json_object_get(s, "batch"));
    if (!a->batch_given && batch > 0 && batch < a->batch && !a->micro_batch && !a->micro_batches) {
        a->batch = batch;
        snprintf(text, sizeof text, "%lld", (long long)batch);
        took(list, sizeof list, "batch", text);
    }
    if (a->data == DATA_FOLDER) {
        const json_int_t resize = json_integer_value(json_object_get(s, "resize"));
        if (!ia->resize && resize > 0) {
            ia->resize = resize;
            snprintf(text, sizeof text, "%lld", (long long)resize);
            took(list, sizeof list, "resize", text);
        }
        const char *mean = json_string_value(json_object_get(s, "mean"));
        const char *std = json_string_value(json_object_get(s, "std"));
        if (!ia->n_mean && mean && (ia->n_mean = channels_of(mean, ia->mean))) took(list, sizeof list, "mean", mean);
        if (!ia->n_std && std && (ia->n_std = channels_of(std, ia->std))) took(list, sizeof list, "std", std);
        json_t *ignore = json_object_get(s, "ignore-label");
        if (!ia->ignore_label_given && json_is_integer(ignore) && json_integer_value(ignore) != ia->ignore_label &&
            json_integer_value(ignore) >= 0 && json_integer_value(ignore) <= 255) {
            ia->ignore_label = (int32_t)json_integer_value(ignore);
            snprintf(text, sizeof text, "%d", (int)ia->ignore_label);
            took(list, sizeof list, "ignore-label", text);
        }
    }
    json_decref(run);
    if (list[0]) printf("settings from the training (%s): %s\n", folder, list);
    return -1;
}

/* A file's size and CRC-32 as text, for the ranks to compare: null for
 * none, or for what is not a readable file (a zoo model's name; the
 * command's own checks name a file missing). */
static json_t *file_digest(const char *path)
{
    struct stat sb;
    uint64_t bytes = 0;
    uint32_t crc = 0;
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return json_null();
    if (brg_file_checksum(path, &bytes, &crc) != BRG_OK) {
        brg_clear_error(); /* not this command's failure: its own read names it */
        return json_null();
    }
    char text[48];
    snprintf(text, sizeof text, "%llu bytes, crc32 %08x", (unsigned long long)bytes, (unsigned)crc);
    return json_string(text);
}

int brg_train_ranks_agree(const char *cmd, const train_args *a)
{
    /* Under mpirun each rank parsed its own command line: settings that no
     * plan holds (the rates, the epochs, the checkpoints, the weights) must
     * agree too, or the ranks train differently or wait for each other for
     * ever; and those that make the plan, so that a difference is named
     * here rather than found later as pipelines that differ. One setting
     * at a time, to name the one that differs; the names first, so that
     * every rank makes the same calls. */
    json_t *s = settings_json(a);
    if (!s) {
        fprintf(stderr, "brigade %s: out of host memory for the settings\n", cmd);
        return BRG_EXIT_FAILURE;
    }
    const brg_cli_plan_args *pa = &a->plan;
    json_object_set_new(s, "model", string_or_null(a->spec));
    json_object_set_new(s, "input", json_pack("[I, I, I]", (json_int_t)a->zoo.channels, (json_int_t)a->zoo.height,
                                              (json_int_t)a->zoo.width));
    json_object_set_new(s, "classes", json_integer((json_int_t)a->zoo.classes));
    json_object_set_new(s, "width-mult", json_real(a->zoo.width_mult));
    json_object_set_new(s, "devices", string_or_null(a->devices));
    json_object_set_new(s, "microbatches", json_integer((json_int_t)a->micro_batches));
    json_object_set_new(s, "micro-batch", json_integer((json_int_t)a->micro_batch));
    json_object_set_new(s, "schedule", string_or_null(pa->schedule));
    json_object_set_new(s, "chunks", json_integer((json_int_t)pa->chunks));
    json_object_set_new(s, "recompute", string_or_null(pa->recompute));
    json_object_set_new(s, "split", string_or_null(pa->split));
    json_object_set_new(s, "headroom", json_real(pa->numbers.headroom));
    json_object_set_new(s, "device-speed", json_real(pa->numbers.device_flops));
    json_object_set_new(s, "link-speed", json_real(pa->numbers.link_bytes_per_s));
    json_object_set_new(s, "profile", string_or_null(pa->numbers.profile_path));
    json_object_set_new(s, "replicas", json_integer(pa->numbers.replicas));
    json_object_set_new(s, "sync-bn", json_boolean(pa->numbers.sync_batchnorm));
    json_object_set_new(s, "checkpoint", string_or_null(a->checkpoint_dir));
    json_object_set_new(s, "checkpoint-every", json_integer((json_int_t)a->checkpoint_every));
    json_object_set_new(s, "keep", json_integer((json_int_t)a->keep));
    json_object_set_new(s, "resume", string_or_null(a->resume_dir));
    json_object_set_new(s, strcmp(cmd, "eval") == 0 ? "weights" : "init-weights", string_or_null(a->init_weights));
    json_object_set_new(s, "watchdog", json_integer((json_int_t)a->watchdog));
    json_object_set_new(s, "watchdog-setup", json_integer((json_int_t)a->watchdog_setup));
    /* The same name may hold other bytes on another node (each node's own
     * copy): the files' contents too, or the ranks ran a mix of both. */
    const char *weights_key = strcmp(cmd, "eval") == 0 ? "the contents of --weights" : "the contents of --init-weights";
    json_object_set_new(s, "the contents of MODEL", file_digest(a->spec));
    json_object_set_new(s, weights_key, file_digest(a->init_weights));
    const char *profile = pa->numbers.profile_path;
    json_object_set_new(s, "the contents of --profile",
                        file_digest(profile && strcmp(profile, "auto") != 0 ? profile : NULL));
    /* --optimizer first: its default --lr differs, so another optimizer
     * alone was named as another --lr (the keys go in insertion order). */
    json_t *ordered = json_object();
    if (!ordered || json_object_set(ordered, "optimizer", json_object_get(s, "optimizer")) != 0 ||
        json_object_update(ordered, s) != 0) {
        json_decref(ordered);
        json_decref(s);
        fprintf(stderr, "brigade %s: out of host memory for the settings\n", cmd);
        return BRG_EXIT_FAILURE;
    }
    json_decref(s);
    s = ordered;
    char names[1024] = "";
    size_t at = 0;
    const char *key;
    json_t *value;
    json_object_foreach(s, key, value) at += (size_t)snprintf(names + at, at < sizeof names ? sizeof names - at : 0,
                                                              "%s ", key);
    brg_status st = brg_world_agree(brg_cli_world, names, strlen(names), "the options given (some rank has "
                                                                          "options another has not)");
    json_object_foreach(s, key, value) {
        if (st != BRG_OK) break;
        char *text = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT);
        char what[96];
        snprintf(what, sizeof what, "%s%s", strncmp(key, "the ", 4) == 0 ? "" : "--", key);
        st = brg_world_agree(brg_cli_world, text ? text : "", text ? strlen(text) : 0, what);
        free(text);
    }
    json_decref(s);
    if (st == BRG_OK) return -1;
    if (brg_world_rank(brg_cli_world) == 0) brg_cli_fail(cmd, st);
    brg_cli_exit_agreed = 1; /* every rank saw the same hashes */
    return BRG_EXIT_USAGE;
}

/* One setting as the command line would give it, for messages. */
static void setting_text(json_t *v, char *out, size_t size)
{
    if (json_is_string(v)) snprintf(out, size, "%s", json_string_value(v));
    else if (json_is_integer(v)) snprintf(out, size, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(out, size, "%g", json_real_value(v));
    else if (json_is_boolean(v)) snprintf(out, size, "%s", json_is_true(v) ? "on" : "off");
    else snprintf(out, size, "?");
}

int brg_train_resume_check(const train_args *a, const train_data *d, const char *path, const char *run_json,
                           int64_t steps_per_epoch, train_position *pos)
{
    json_error_t jerr;
    json_t *run = json_loads(run_json, 0, &jerr);
    json_t *saved = NULL;
    json_int_t epoch = 0, step = 0, correct = 0, seen = 0, counted = -1, their_steps = -1;
    double loss_sum = 0.0;
    if (!run || json_unpack_ex(run, &jerr, 0, "{s:I, s:I, s?I, s:F, s:I, s:I, s?I, s:o}", "epoch", &epoch,
                               "epoch_step", &step, "steps_per_epoch", &their_steps, "epoch_loss_sum", &loss_sum,
                               "epoch_correct", &correct, "epoch_seen", &seen, "epoch_counted", &counted, "settings",
                               &saved) != 0 ||
        !json_is_object(saved) || epoch < 1 || step < 0 || seen < 0 || !isfinite(loss_sum) || loss_sum < 0.0 ||
        correct < 0 || correct > (counted >= 0 ? counted : seen)) {
        fprintf(stderr, "brigade train: --resume: %s/manifest.json: its \"run\" is not one brigade train wrote (%s)\n",
                path, jerr.text[0] ? jerr.text : "bad values");
        json_decref(run);
        return BRG_EXIT_FAILURE;
    }
    json_t *mine = settings_json(a);
    int rc = -1;
    const char *key;
    json_t *want;
    /* Three rounds: --optimizer first (below), --epochs last, since
     * whether it may change depends on the others (at a constant rate the
     * epochs only say where to stop; a cosine schedule spreads its rates
     * over them, so they set every step). */
    const char *moved_from = NULL; /* the folder the checkpoint's data was in, if it moved */
    /* Class folders renamed, added or removed: each label would mean
     * another class than the weights learnt. */
    json_t *their_classes = json_object_get(run, "classes"), *classes = classes_json(d);
    const int same_classes = json_is_array(their_classes) && classes && json_equal(their_classes, classes);
    for (int round = 0; round < 3 && rc < 0; round++)
        json_object_foreach(saved, key, want) {
            const int epochs = strcmp(key, "epochs") == 0;
            /* --optimizer first: its default --lr differs, so another
             * optimizer alone was reported as another --lr. */
            const int turn = strcmp(key, "optimizer") == 0 ? 0 : epochs ? 2 : 1;
            json_t *have = json_object_get(mine, key);
            if (turn != round || (have && json_equal(have, want)) || (have && epochs && !a->cosine)) continue;
            /* A class folder moved: the same data when its epochs have the
             * checkpoint's length (checked below) and its classes are the
             * same. Other folders (IDX files, segmentation folders, names
             * that are not UTF-8: no classes recorded) must be the same
             * folder. */
            const char *was_data = json_string_value(want);
            if (strcmp(key, "data") == 0 && a->data == DATA_FOLDER && was_data &&
                strcmp(was_data, "fashion-mnist") != 0 && strcmp(was_data, "synthetic") != 0 &&
                (same_folder(a->data_path, was_data, run) || (their_steps >= 0 && same_classes))) {
                if (!same_folder(a->data_path, was_data, run)) moved_from = was_data;
                continue;
            }
            char was[64], is[64] = "(none)", made[96], fix[96];
            setting_text(want, was, sizeof was);
            if (have) setting_text(have, is, sizeof is);
            /* An option given to neither is an empty string (--mean, --std). */
            if (!*is) snprintf(is, sizeof is, "none");
            if (*was) {
                snprintf(made, sizeof made, "with --%s %s", key, was);
                snprintf(fix, sizeof fix, "give --%s %s", key, was);
            } else {
                snprintf(made, sizeof made, "without --%s", key);
                snprintf(fix, sizeof fix, "leave --%s out", key);
            }
            fprintf(stderr,
                    "brigade train: --resume: the checkpoint %s was made %s, this run has %s; a "
                    "continuation needs the same settings (the devices, schedule and micro-batches may change%s): "
                    "%s, or start afresh without --resume\n",
                    path, made, is,
                    epochs ? "; so may --epochs at a constant --lr-schedule, but a cosine one spreads its rates over "
                             "the epochs"
                           : "",
                    fix);
            rc = BRG_EXIT_USAGE;
            break;
        }
    /* Fewer epochs than the checkpoint has begun would call a run done
     * whose weights are past its end. */
    const json_int_t begun = step > 0 ? epoch : epoch - 1;
    if (rc < 0 && a->epochs < begun) {
        fprintf(stderr,
                "brigade train: --resume: the checkpoint %s is %s epoch %lld; --epochs %lld ends before it: give "
                "--epochs %lld or more\n",
                path, step > 0 ? "in" : "at the end of", (long long)begun, (long long)a->epochs, (long long)begun);
        rc = BRG_EXIT_USAGE;
    }
    if (rc < 0 && json_object_size(saved) != json_object_size(mine)) {
        fprintf(stderr, "brigade train: --resume: the checkpoint %s records other settings than this brigade does\n",
                path);
        rc = BRG_EXIT_FAILURE;
    }
    /* The same settings over other data (another image folder, more or
     * fewer images in it) make epochs of another length. Data that does
     * not fit the checkpoint is refused as a setting that differs is
     * (exit 2): nothing failed, the command asks for another run. */
    if (rc < 0 && their_steps >= 0 && their_steps != steps_per_epoch) {
        fprintf(stderr,
                "brigade train: --resume: the checkpoint %s was made with epochs of %lld steps, this run's have "
                "%lld (batch %lld): its training data changed (another folder, or images added or removed); a "
                "continuation needs the same training data\n",
                path, (long long)their_steps, (long long)steps_per_epoch, (long long)a->batch);
        rc = BRG_EXIT_USAGE;
    }
    /* Written since 2026-11-30: older checkpoints are checked by their
     * epochs' length alone. */
    json_t *their_samples = json_object_get(run, "train_samples");
    if (rc < 0 && json_is_integer(their_samples) && json_integer_value(their_samples) != (json_int_t)d->train_count) {
        fprintf(stderr,
                "brigade train: --resume: the checkpoint %s was made over %lld training samples, this run's data has "
                "%lld: its training data changed (another folder, or images added or removed), and each epoch's "
                "order with it; a continuation needs the same training data\n",
                path, (long long)json_integer_value(their_samples), (long long)d->train_count);
        rc = BRG_EXIT_USAGE;
    }
    if (rc < 0 && json_is_array(their_classes) && classes && !same_classes) {
        char *was = json_dumps(their_classes, JSON_COMPACT), *is = json_dumps(classes, JSON_COMPACT);
        fprintf(stderr,
                "brigade train: --resume: the checkpoint %s learnt the classes %s (in label order), this run's "
                "folder has %s: a renamed, added or removed class folder changes what each label means; a "
                "continuation needs the same classes\n",
                path, was ? was : "(unknown)", is ? is : "(unknown)");
        free(was);
        free(is);
        rc = BRG_EXIT_USAGE;
    }
    json_decref(classes);
    if (rc < 0 && moved_from)
        printf("data     %s in place of %s, where the checkpoint's training read it: the same classes and epoch "
               "length\n", a->data_path, moved_from);
    if (rc < 0) {
        pos->epoch = epoch;
        pos->epoch_step = step;
        pos->loss_sum = loss_sum;
        pos->correct = correct;
        pos->seen = seen;
        pos->counted = counted >= 0 ? counted : seen; /* written before per-pixel losses: one label a sample */
    }
    json_decref(mine);
    json_decref(run);
    return rc;
}

/* ---- signals ---- */

static volatile sig_atomic_t stop_signal;
static struct timespec stop_signal_at; /* when the first came (CLOCK_MONOTONIC) */

/* A second SIGINT or SIGTERM exits at once: said with write(2), all a
 * handler may use. */
static void say_exit_at_once(int sig)
{
    static const char intr[] = "brigade: a second SIGINT: exiting at once, nothing more saved\n";
    static const char term[] = "brigade: a second SIGTERM: exiting at once, nothing more saved\n";
    const ssize_t w = sig == SIGINT ? write(STDERR_FILENO, intr, sizeof intr - 1)
                                    : write(STDERR_FILENO, term, sizeof term - 1);
    (void)w;
}

static void on_signal(int sig)
{
    /* Under mpirun, SIGTERM is also how another rank's abort ends this
     * one (SIGKILL follows): what this rank held of its standard error
     * in the setup goes out now, or never. */
    if (sig == SIGTERM) brg_cli_stderr_signalled();
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe */
    if (stop_signal) {
        /* A hang-up may come twice (to the job, and from the shell), and
         * once stopping, the output's reader may be gone (the terminal's
         * tee, killed by the same Ctrl-C or hang-up): neither may cut the
         * save short. Nor may the same signal within a second: one press
         * delivered twice (`timeout -s INT` signals the child, then its
         * group, and the two are not always merged), which exited without
         * saving. A second Ctrl-C or SIGTERM after that means now. */
        if (sig == SIGHUP || sig == SIGPIPE) return;
        const double since = (double)(now.tv_sec - stop_signal_at.tv_sec) +
                             1e-9 * (double)(now.tv_nsec - stop_signal_at.tv_nsec);
        if (sig == stop_signal && since < 1.0) return;
        say_exit_at_once(sig);
        _exit(128 + sig);
    }
    stop_signal_at = now;
    stop_signal = sig;
}

void brg_train_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask); /* one handler at a time: the first's time and number are set together */
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaddset(&sa.sa_mask, SIGPIPE);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* A closed terminal or ssh session, and the output's reader gone (a
     * pipe to tee or head): stops too, unless asked to ignore them. */
    const int quiet[2] = {SIGHUP, SIGPIPE};
    for (int i = 0; i < 2; i++) {
        struct sigaction was;
        if (sigaction(quiet[i], NULL, &was) == 0 && was.sa_handler != SIG_IGN) sigaction(quiet[i], &sa, NULL);
    }
}

const char *brg_train_signal_name(int sig)
{
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE (the output's reader is gone)";
    default: return "SIGTERM";
    }
}

int brg_train_stop_signal(void) { return (int)stop_signal; }

/* A pipeline's training state in files (brigade/checkpoint.h):
 *   - resumed from a checkpoint on the same partition, training goes on
 *     bit for bit as if never stopped (Adam, BatchNorm, dropout);
 *   - resumed on another partition and schedule, the weights after the
 *     same steps agree within float tolerance;
 *   - a missing, extra, misshapen tensor, another optimizer or model: a
 *     message naming file and tensor, and nothing loaded;
 *   - checkpoint folders: a damaged file or manifest, or a missing
 *     manifest, is passed over for the newest complete one (a manifest has
 *     its own checksum), --keep removes the oldest, and the
 *     initial weights of a seed are the pipeline's;
 *   - the lock on a folder: refused while held, and a warning (no lock)
 *     on a file system that cannot lock. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "brigade/checkpoint.h"
#include "brigade/pipeline.h"
#include "brigade/plan.h"
#include "brigade/safetensors.h"
#include "pipeline_test.h"

#define BATCH 8
#define LR 0.01f

static char folder[256]; /* this test's scratch folder */

/* flock as a file system without locks (NFS mounted nolock) answers it,
 * while flock_errno is set: this definition takes the library's calls. */
static int flock_errno;
/* When set, that file is removed just before the next flock: a run that
 * gives up the folder it made (its lock file removed while it held it)
 * between another's open and flock. */
static const char *flock_unlink;
int flock(int fd, int operation)
{
    if (flock_unlink) {
        CHECK(unlink(flock_unlink) == 0);
        flock_unlink = NULL;
    }
    if (flock_errno) {
        errno = flock_errno;
        return -1;
    }
    return (int)syscall(SYS_flock, fd, operation);
}

typedef struct run {
    brg_plan *plan;
    brg_device *devs[8];
    brg_pipeline *pl;
    int p;
} run;

/* A pipeline of m on p CPU devices (kind, mbs micro-batches) with opt; 0
 * after a failed check. */
static int run_open(run *r, const brg_model *m, int p, int mbs, brg_schedule_kind kind,
                    const brg_optimizer_config *opt)
{
    memset(r, 0, sizeof *r);
    r->p = p;
    brg_device_spec specs[8];
    for (int d = 0; d < p; d++) specs[d] = cpu_spec(64 * MiB);
    brg_plan_options o = plan_options(specs, p, BATCH, mbs, kind, 1, NULL);
    o.optimizer = *opt;
    o.explain = 0;
    CHECK_OK(brg_plan_create(m, &o, &r->plan));
    if (!r->plan) return 0;
    for (int d = 0; d < p; d++) {
        CHECK_OK(test_device_create(&brg_plan_get_stage(r->plan, d)->spec, d, &r->devs[d]));
        if (!r->devs[d]) return 0;
    }
    brg_pipeline_options po = brg_pipeline_options_init();
    po.seed = 5;
    CHECK_OK(pipeline_from_plan(r->plan, r->devs, p, &po, &r->pl));
    return r->pl != NULL;
}

static void run_close(run *r)
{
    brg_pipeline_destroy(r->pl);
    for (int d = 0; d < r->p; d++) brg_device_destroy(r->devs[d]);
    brg_plan_destroy(r->plan);
    memset(r, 0, sizeof *r);
}

/* A fixed stream of STEPS_MAX batches, made once (main). */
#define STEPS_MAX 8
static float *stream_images;
static int32_t *stream_labels;

/* Steps first..last-1 of the stream. */
static void train(run *r, const brg_model *m, int first, int last)
{
    const int64_t sample = sample_floats(m);
    CHECK(last <= STEPS_MAX);
    for (int s = first; s < last && s < STEPS_MAX; s++)
        CHECK_OK(brg_pipeline_step(r->pl, LR, stream_images + (int64_t)s * BATCH * sample, stream_labels + s * BATCH,
                                   BATCH, NULL, NULL));
}

/* Every parameter and running statistic of the pipeline (malloc'd). */
static float *weights_of(const run *r, const brg_model *m, int64_t *count)
{
    brg_stage *stages[16];
    const int n = pipeline_stages(r->pl, stages);
    return gather(m, stages, n, 0, NULL, count);
}

static void path_in(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", folder, name); }

static brg_optimizer_config adam(void) { return brg_optimizer_config_init(BRG_OPTIMIZER_ADAM); }

/* ---- resume ---- */

static void test_resume_same_partition(const brg_model *m)
{
    const brg_optimizer_config opt = adam();
    run a, b, c;
    char dir[300];
    path_in(dir, sizeof dir, "same");
    /* a: 5 steps straight; b: 3 steps and a checkpoint; c: from it, 2 more */
    if (!run_open(&a, m, 2, 4, BRG_SCHEDULE_1F1B, &opt) || !run_open(&b, m, 2, 4, BRG_SCHEDULE_1F1B, &opt)) goto done;
    train(&a, m, 0, 5);
    train(&b, m, 0, 3);
    char path[4096];
    CHECK_OK(brg_checkpoint_save(b.pl, dir, "{\"note\": \"test\"}", 2, path, sizeof path, NULL, 0));
    CHECK_MSG(strstr(path, "step-0000000003") != NULL, "checkpoint at %s", path);
    if (!run_open(&c, m, 2, 4, BRG_SCHEDULE_1F1B, &opt)) goto done;
    CHECK_OK(brg_checkpoint_load(c.pl, path));
    CHECK(brg_pipeline_steps(c.pl) == 3);
    brg_checkpoint_manifest man;
    CHECK_OK(brg_checkpoint_read(path, &man));
    CHECK(man.steps == 3 && man.optimizer.kind == BRG_OPTIMIZER_ADAM && strstr(man.run_json, "\"note\""));
    brg_checkpoint_manifest_free(&man);
    train(&c, m, 3, 5);
    int64_t na = 0, nc = 0;
    float *wa = weights_of(&a, m, &na), *wc = weights_of(&c, m, &nc);
    CHECK(wa && wc && na == nc && na > 0);
    if (wa && wc && na == nc)
        CHECK_MSG(memcmp(wa, wc, (size_t)na * sizeof *wa) == 0, "resumed weights differ from straight ones (rel %g)",
                  rel_diff(wa, wc, na));
    free(wa);
    free(wc);
    /* and the optimizer state too: a's and c's files are the same bytes
     * (the manifest's run object aside, none of them hold times) */
    char fa[300], fc[300];
    path_in(fa, sizeof fa, "a.safetensors");
    path_in(fc, sizeof fc, "c.safetensors");
    CHECK_OK(brg_pipeline_save_state(a.pl, fa, BRG_STATE_WEIGHTS | BRG_STATE_OPTIMIZER, NULL, NULL, 0));
    CHECK_OK(brg_pipeline_save_state(c.pl, fc, BRG_STATE_WEIGHTS | BRG_STATE_OPTIMIZER, NULL, NULL, 0));
    brg_safetensors *x = NULL, *y = NULL;
    CHECK_OK(brg_safetensors_open(fa, &x));
    CHECK_OK(brg_safetensors_open(fc, &y));
    if (x && y) {
        CHECK(brg_safetensors_count(x) == brg_safetensors_count(y) && brg_safetensors_count(x) > 0);
        int adam_m = 0;
        for (int i = 0; i < brg_safetensors_count(x) && i < brg_safetensors_count(y); i++) {
            brg_safetensor tx, ty;
            CHECK_OK(brg_safetensors_get(x, i, &tx));
            CHECK_OK(brg_safetensors_get(y, i, &ty));
            CHECK(strcmp(tx.name, ty.name) == 0 && tx.bytes == ty.bytes && memcmp(tx.data, ty.data, tx.bytes) == 0);
            adam_m += strstr(tx.name, ".adam_m") != NULL;
        }
        CHECK(adam_m > 0);
    }
    brg_safetensors_close(x);
    brg_safetensors_close(y);
done:
    run_close(&a);
    run_close(&b);
    run_close(&c);
}

static void test_resume_other_partition(const brg_model *m)
{
    const brg_optimizer_config opt = adam();
    run a, b, c;
    char dir[300];
    path_in(dir, sizeof dir, "other");
    /* The same micro-batches (BatchNorm normalizes each with its own
     * statistics, so their size is part of the arithmetic). */
    if (!run_open(&a, m, 1, 4, BRG_SCHEDULE_GPIPE, &opt) || !run_open(&b, m, 1, 4, BRG_SCHEDULE_GPIPE, &opt))
        goto done;
    train(&a, m, 0, 5);
    train(&b, m, 0, 3);
    char path[4096];
    CHECK_OK(brg_checkpoint_save(b.pl, dir, NULL, 1, path, sizeof path, NULL, 0));
    /* three devices, ZB-H1 */
    if (!run_open(&c, m, 3, 4, BRG_SCHEDULE_ZB_H1, &opt)) goto done;
    CHECK_OK(brg_checkpoint_load(c.pl, path));
    train(&c, m, 3, 5);
    int64_t na = 0, nc = 0;
    float *wa = weights_of(&a, m, &na), *wc = weights_of(&c, m, &nc);
    CHECK(wa && wc && na == nc);
    if (wa && wc && na == nc) {
        const double rd = rel_diff(wa, wc, na);
        fprintf(stderr, "other partition: weights after 3 + 2 steps within %.2g of one device's\n", rd);
        CHECK_MSG(rd < 1e-4, "weights resumed on 3 devices differ from one device's by %g", rd);
    }
    free(wa);
    free(wc);
done:
    run_close(&a);
    run_close(&b);
    run_close(&c);
}

/* ---- bad files ---- */

/* Loading path must fail with want, naming each of names, and leave the
 * weights as they were. */
static void load_fails(run *r, const brg_model *m, const char *path, unsigned parts, brg_status want,
                       const char *name1, const char *name2)
{
    int64_t n0 = 0, n1 = 0;
    float *before = weights_of(r, m, &n0);
    CHECK_STATUS(brg_pipeline_load_state(r->pl, path, parts), want);
    fprintf(stderr, "refused: %s\n", brg_last_error());
    if (name1) CHECK_ERROR_HAS(name1);
    if (name2) CHECK_ERROR_HAS(name2);
    float *after = weights_of(r, m, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, (size_t)n0 * sizeof *before) == 0);
    free(before);
    free(after);
}

/* The tensors of file src rewritten to dst: without `drop`, with `extra`
 * added, or with tensor `reshape` given another shape. */
static void rewrite(const char *src, const char *dst, const char *drop, const char *extra, const char *reshape)
{
    brg_safetensors *f = NULL;
    CHECK_OK(brg_safetensors_open(src, &f));
    if (!f) return;
    const int n = brg_safetensors_count(f);
    brg_safetensor *ts = calloc((size_t)n + 1, sizeof *ts);
    int k = 0;
    static const float one = 1.0f;
    for (int i = 0; i < n; i++) {
        CHECK_OK(brg_safetensors_get(f, i, &ts[k]));
        if (drop && strcmp(ts[k].name, drop) == 0) continue;
        if (reshape && strcmp(ts[k].name, reshape) == 0) {
            ts[k].ndim = 1;
            ts[k].shape[0] = (int64_t)(ts[k].bytes / sizeof(float));
        }
        k++;
    }
    if (extra) {
        ts[k].name = extra;
        ts[k].dtype = BRG_F32;
        ts[k].ndim = 1;
        ts[k].shape[0] = 1;
        ts[k].data = &one;
        ts[k].bytes = sizeof one;
        k++;
    }
    CHECK_OK(brg_safetensors_write(dst, ts, k, NULL, NULL, 0));
    free(ts);
    brg_safetensors_close(f);
}

static void test_bad_files(const brg_model *m)
{
    const brg_optimizer_config opt = adam();
    brg_optimizer_config sgd = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    sgd.momentum = 0.9f;
    run r, s;
    if (!run_open(&r, m, 2, 2, BRG_SCHEDULE_1F1B, &opt) || !run_open(&s, m, 1, 1, BRG_SCHEDULE_GPIPE, &sgd)) goto done;
    train(&s, m, 0, 1);
    char good[300], bad[300], opt_file[300];
    path_in(good, sizeof good, "good.safetensors");
    path_in(bad, sizeof bad, "bad.safetensors");
    path_in(opt_file, sizeof opt_file, "sgd-optimizer.safetensors");
    CHECK_OK(brg_pipeline_save_state(s.pl, good, BRG_STATE_WEIGHTS, NULL, NULL, 0));
    CHECK_OK(brg_pipeline_save_state(s.pl, opt_file, BRG_STATE_OPTIMIZER, NULL, NULL, 0));
    /* the first layer with parameters, and its first parameter */
    char first[160] = "";
    for (int l = 0; l < brg_model_layer_count(m) && !first[0]; l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        brg_param_info info;
        if (brg_layer_param_count(ly, m) > 0 && brg_layer_param(ly, m, 0, &info) == BRG_OK)
            snprintf(first, sizeof first, "%s.%s", ly->name, info.name);
    }
    rewrite(good, bad, first, NULL, NULL);
    load_fails(&r, m, bad, BRG_STATE_WEIGHTS, BRG_ERR_FORMAT, bad, first);
    rewrite(good, bad, NULL, "not.in.the.model", NULL);
    load_fails(&r, m, bad, BRG_STATE_WEIGHTS, BRG_ERR_FORMAT, bad, "not.in.the.model");
    rewrite(good, bad, NULL, NULL, first);
    load_fails(&r, m, bad, BRG_STATE_WEIGHTS, BRG_ERR_FORMAT, first, "shape");
    /* SGD's momentum into an Adam pipeline */
    load_fails(&r, m, opt_file, BRG_STATE_OPTIMIZER, BRG_ERR_FORMAT, opt_file, ".adam_m");
    /* a weights file where the optimizer's is expected */
    load_fails(&r, m, good, BRG_STATE_OPTIMIZER, BRG_ERR_FORMAT, good, NULL);
    path_in(bad, sizeof bad, "no-such-file.safetensors");
    load_fails(&r, m, bad, BRG_STATE_WEIGHTS, BRG_ERR_IO, bad, NULL);
    /* and the good one loads: then r holds s's weights */
    CHECK_OK(brg_pipeline_load_state(r.pl, good, BRG_STATE_WEIGHTS));
    int64_t n1 = 0, n2 = 0;
    float *w1 = weights_of(&r, m, &n1), *w2 = weights_of(&s, m, &n2);
    CHECK(w1 && w2 && n1 == n2 && memcmp(w1, w2, (size_t)n1 * sizeof *w1) == 0);
    free(w1);
    free(w2);
done:
    run_close(&r);
    run_close(&s);
}

/* ---- folders ---- */

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void flip_byte(const char *path, long at)
{
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f) return;
    fseek(f, at, SEEK_SET);
    const int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
}

static void test_folders(const brg_model *m)
{
    const brg_optimizer_config opt = adam();
    run r;
    char dir[300], path[4096], skipped[2048], file[4200];
    path_in(dir, sizeof dir, "folders/nested");
    if (!run_open(&r, m, 2, 2, BRG_SCHEDULE_1F1B, &opt)) goto done;
    for (int s = 1; s <= 4; s++) {
        train(&r, m, s - 1, s);
        CHECK_OK(brg_checkpoint_save(r.pl, dir, NULL, 2, path, sizeof path, NULL, 0));
    }
    /* keep 2: steps 3 and 4 are left */
    snprintf(file, sizeof file, "%s/step-0000000002", dir);
    CHECK(!exists(file));
    snprintf(file, sizeof file, "%s/step-0000000003/manifest.json", dir);
    CHECK(exists(file));
    CHECK_OK(brg_checkpoint_latest(dir, path, sizeof path, skipped, sizeof skipped));
    CHECK(strstr(path, "step-0000000004") && skipped[0] == '\0');
    /* step 4's weights damaged: passed over for step 3, and said why */
    snprintf(file, sizeof file, "%s/step-0000000004/weights.safetensors", dir);
    flip_byte(file, 200);
    CHECK_OK(brg_checkpoint_latest(dir, path, sizeof path, skipped, sizeof skipped));
    fprintf(stderr, "skipped: %s\n", skipped);
    CHECK(strstr(path, "step-0000000003") && strstr(skipped, "step-0000000004") && strstr(skipped, "checksum"));
    snprintf(file, sizeof file, "%s/step-0000000004", dir);
    CHECK_STATUS(brg_checkpoint_load(r.pl, file), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("weights.safetensors");
    /* a save that died before its manifest: passed over too */
    snprintf(file, sizeof file, "%s/step-0000000003/manifest.json", dir);
    CHECK(unlink(file) == 0);
    CHECK_STATUS(brg_checkpoint_latest(dir, path, sizeof path, skipped, sizeof skipped), BRG_ERR_IO);
    CHECK_ERROR_HAS("no complete checkpoint");
    CHECK(strstr(skipped, "manifest.json is missing") != NULL);
    /* a new save goes on; a leftover temporary folder is not a checkpoint */
    snprintf(file, sizeof file, "%s/.step-0000000009.tmp", dir);
    CHECK(mkdir(file, 0777) == 0);
    train(&r, m, 4, 5);
    CHECK_OK(brg_checkpoint_save(r.pl, dir, NULL, 2, path, sizeof path, NULL, 0));
    CHECK_OK(brg_checkpoint_latest(dir, path, sizeof path, skipped, sizeof skipped));
    CHECK(strstr(path, "step-0000000005") != NULL);
    /* keep 2 counts complete checkpoints only: the damaged step 4 and the
     * unfinished step 3 went, and the crashed save of step 9 with them */
    snprintf(file, sizeof file, "%s/step-0000000004", dir);
    CHECK(!exists(file));
    snprintf(file, sizeof file, "%s/step-0000000003", dir);
    CHECK(!exists(file));
    snprintf(file, sizeof file, "%s/.step-0000000009.tmp", dir);
    CHECK(!exists(file));
    /* another model's checkpoint */
    brg_model *other = skip_model_bn(0);
    run o;
    if (other && run_open(&o, other, 1, 1, BRG_SCHEDULE_GPIPE, &opt)) {
        CHECK_STATUS(brg_checkpoint_load(o.pl, path), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("of another model than this run's");
        run_close(&o);
    }
    brg_model_destroy(other);
done:
    run_close(&r);
}

/* A file's text (NULL when it cannot be read), and text written to path. */
static char *text_of(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *text = f ? calloc(1, 1 << 20) : NULL;
    if (text) (void)fread(text, 1, (1 << 20) - 1, f);
    if (f) fclose(f);
    CHECK(text != NULL);
    return text;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL && fputs(text, f) >= 0);
    if (f) fclose(f);
}

/* text with its first `from` made `to`, and without the line holding
 * `drop` (each when given). */
static char *edited(const char *text, const char *from, const char *to, const char *drop)
{
    char *out = calloc(1, strlen(text) + (to ? strlen(to) : 0) + 1);
    if (!out) return NULL;
    strcpy(out, text);
    char *at = from ? strstr(out, from) : NULL;
    CHECK(!from || at);
    if (at) {
        memmove(at + strlen(to), at + strlen(from), strlen(at + strlen(from)) + 1);
        memcpy(at, to, strlen(to));
    }
    char *line = drop ? strstr(out, drop) : NULL;
    CHECK(!drop || line);
    if (line) {
        char *end = strchr(line, '\n');
        while (line > out && line[-1] != '\n') line--;
        memmove(line, end + 1, strlen(end + 1) + 1);
    }
    return out;
}

/* Damage in a manifest is found by its own checksum (so that a resume
 * falls back to the checkpoint before it), a model it names must be one
 * that can be built, and a state file of a checkpoint is checked against
 * its manifest as it is read, whoever reads it. */
static void test_manifest(const brg_model *m)
{
    const brg_optimizer_config opt = adam();
    run r;
    char dir[300], path[4096], skipped[2048], step2[4200], file[4300], weights[4300];
    path_in(dir, sizeof dir, "manifests");
    if (!run_open(&r, m, 2, 2, BRG_SCHEDULE_1F1B, &opt)) return;
    for (int s = 1; s <= 2; s++) {
        train(&r, m, s - 1, s);
        CHECK_OK(brg_checkpoint_save(r.pl, dir, NULL, 3, path, sizeof path, NULL, 0));
    }
    snprintf(step2, sizeof step2, "%s/step-0000000002", dir);
    snprintf(file, sizeof file, "%s/manifest.json", step2);
    snprintf(weights, sizeof weights, "%s/weights.safetensors", step2);
    char *original = text_of(file);
    if (!original) goto done;
    CHECK(strncmp(original, "{\n \"manifest_crc32\": \"", 22) == 0);
    brg_checkpoint_manifest man;
    /* a layer's kind changed: the checksum finds it, and the resume takes
     * step 1, saying why */
    char *text = edited(original, "\"conv2d\"", "\"conv2e\"", NULL);
    write_text(file, text);
    CHECK_STATUS(brg_checkpoint_read(step2, &man), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("(a damaged or edited manifest)");
    CHECK_OK(brg_checkpoint_latest(dir, path, sizeof path, skipped, sizeof skipped));
    CHECK(strstr(path, "step-0000000001") && strstr(skipped, "step-0000000002") && strstr(skipped, "checksum"));
    free(text);
    /* ...and without a checksum (a manifest written before there were
     * any), the model that cannot be built is damage all the same */
    text = edited(original, "\"conv2d\"", "\"conv2e\"", "\"manifest_crc32\"");
    write_text(file, text);
    CHECK_STATUS(brg_checkpoint_read_manifest(step2, &man), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("its \"model\" is not a model");
    CHECK_OK(brg_checkpoint_latest(dir, path, sizeof path, skipped, sizeof skipped));
    CHECK(strstr(path, "step-0000000001") != NULL);
    free(text);
    /* a whole manifest without a checksum is taken as it is */
    text = edited(original, NULL, NULL, "\"manifest_crc32\"");
    write_text(file, text);
    CHECK_OK(brg_checkpoint_read(step2, &man));
    brg_checkpoint_manifest_free(&man);
    CHECK_OK(brg_checkpoint_load(r.pl, step2));
    free(text);
    /* the checksum's name damaged: a member no manifest has */
    text = edited(original, "manifest_crc32", "manifest_crc33", NULL);
    write_text(file, text);
    CHECK_STATUS(brg_checkpoint_read_manifest(step2, &man), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("\"manifest_crc33\" that no checkpoint has");
    free(text);
    /* whole again, with a damaged weights file: the manifest alone reads
     * well, and the file fails its checksum when loaded by itself (eval's
     * --weights DIR/step-N/weights.safetensors), nothing loaded */
    write_text(file, original);
    char loose[300];
    path_in(loose, sizeof loose, "loose.safetensors");
    rewrite(weights, loose, NULL, NULL, NULL);
    struct stat sb;
    CHECK(stat(weights, &sb) == 0);
    /* eval reads the manifest once and hands it to the load, which checks
     * the file against the size and checksum it lists */
    brg_checkpoint_manifest once;
    CHECK_OK(brg_checkpoint_read_manifest(step2, &once));
    CHECK(once.file_bytes[0] == (uint64_t)sb.st_size);
    CHECK_OK(brg_pipeline_load_state_listed(r.pl, weights, BRG_STATE_WEIGHTS, &once));
    flip_byte(weights, (long)sb.st_size - 8); /* a value: the file still parses */
    CHECK_OK(brg_checkpoint_read_manifest(step2, &man));
    brg_checkpoint_manifest_free(&man);
    load_fails(&r, m, weights, BRG_STATE_WEIGHTS, BRG_ERR_FORMAT, "weights.safetensors: checksum",
               "(a damaged file)");
    CHECK_STATUS(brg_pipeline_load_state_listed(r.pl, weights, BRG_STATE_WEIGHTS, &once), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("weights.safetensors: checksum");
    brg_checkpoint_manifest_free(&once);
    CHECK_STATUS(brg_checkpoint_load(r.pl, step2), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("checksum");
    /* a copy outside any checkpoint is not held to a manifest */
    CHECK_OK(brg_pipeline_load_state(r.pl, loose, BRG_STATE_WEIGHTS));
done:
    free(original);
    run_close(&r);
}

/* What a save removes after itself, and what it must leave. */
static void test_prune(const brg_model *m)
{
    const brg_optimizer_config opt = adam();
    run r;
    char dir[300], path[4096], skipped[2048], left[1024], file[4200], other[4200], note[1024];
    path_in(dir, sizeof dir, "prune");
    if (!run_open(&r, m, 2, 2, BRG_SCHEDULE_1F1B, &opt)) return;
    train(&r, m, 0, 2);
    CHECK_OK(brg_checkpoint_save(r.pl, dir, NULL, 1, path, sizeof path, left, sizeof left));
    CHECK(left[0] == '\0');
    /* a checkpoint renamed to another step is refused... */
    snprintf(file, sizeof file, "%s/step-0000000002", dir);
    snprintf(other, sizeof other, "%s/step-0000000009", dir);
    CHECK(rename(file, other) == 0);
    brg_checkpoint_manifest man;
    CHECK_STATUS(brg_checkpoint_read(other, &man), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("named after");
    int count = 0;
    int64_t newest = 0;
    CHECK_OK(brg_checkpoint_count(dir, &count, &newest));
    CHECK(count == 1 && newest == 9);
    /* ...and, newer than a save, left alone by it: with keep 1 the new
     * checkpoint is the one that stays, whatever newer folders there are */
    train(&r, m, 2, 3);
    CHECK_OK(brg_checkpoint_save(r.pl, dir, NULL, 1, path, sizeof path, left, sizeof left));
    CHECK(exists(other) && strstr(path, "step-0000000003") && exists(path));
    CHECK_OK(brg_checkpoint_latest(dir, path, sizeof path, skipped, sizeof skipped));
    CHECK(strstr(path, "step-0000000003") && strstr(skipped, "step-0000000009"));
    /* a link in a checkpoint's place is not followed, a folder holding a
     * file of somebody else's is left whole: both named, the save done */
    char precious[300], notes[400];
    path_in(precious, sizeof precious, "precious");
    snprintf(notes, sizeof notes, "%s/notes.txt", precious);
    CHECK(mkdir(precious, 0777) == 0);
    FILE *f = fopen(notes, "w");
    if (f) fclose(f);
    snprintf(file, sizeof file, "%s/step-0000000001", dir);
    CHECK(symlink(precious, file) == 0);
    snprintf(file, sizeof file, "%s/step-0000000003/notes.txt", dir);
    f = fopen(file, "w");
    if (f) fclose(f);
    snprintf(file, sizeof file, "%s/.step-0000000002.tmp", dir); /* a crashed save, half written */
    CHECK(mkdir(file, 0777) == 0);
    snprintf(file, sizeof file, "%s/.step-0000000002.tmp/weights.safetensors.tmp.123", dir);
    f = fopen(file, "w");
    if (f) fclose(f);
    train(&r, m, 3, 4);
    CHECK_OK(brg_checkpoint_save(r.pl, dir, NULL, 1, path, sizeof path, left, sizeof left));
    fprintf(stderr, "left: %s\n", left);
    CHECK(exists(notes) && strstr(left, "step-0000000001") && strstr(left, "not a folder"));
    snprintf(file, sizeof file, "%s/step-0000000003/weights.safetensors", dir);
    CHECK(exists(file) && strstr(left, "step-0000000003") && strstr(left, "notes.txt"));
    snprintf(file, sizeof file, "%s/.step-0000000002.tmp", dir);
    CHECK(!exists(file) && exists(path));
    /* one run at a time: a second hold of the folder is refused, naming
     * the first's process, until the first lets go */
    int h1 = -1, h2 = -1;
    CHECK_OK(brg_checkpoint_lock(dir, &h1, note, sizeof note, NULL));
    CHECK_STATUS(brg_checkpoint_lock(dir, &h2, note, sizeof note, NULL), BRG_ERR_IO);
    char pid[32];
    snprintf(pid, sizeof pid, "process %d ", (int)getpid());
    CHECK_ERROR_HAS("another run");
    CHECK_ERROR_HAS(pid);
    CHECK(h2 == -1);
    brg_checkpoint_unlock(h1);
    CHECK_OK(brg_checkpoint_lock(dir, &h2, note, sizeof note, NULL));
    CHECK(note[0] == '\0' && h2 >= 0);
    brg_checkpoint_unlock(h2);
    /* the lock file removed between its open and the lock: the lock is
     * taken again on the file there now, so a second run is still refused
     * (it was held on the removed file, and the second got a new one) */
    char lockfile[400];
    snprintf(lockfile, sizeof lockfile, "%s/.lock", dir);
    flock_unlink = lockfile;
    CHECK_OK(brg_checkpoint_lock(dir, &h1, note, sizeof note, NULL));
    CHECK(flock_unlink == NULL && exists(lockfile));
    CHECK_STATUS(brg_checkpoint_lock(dir, &h2, note, sizeof note, NULL), BRG_ERR_IO);
    CHECK_ERROR_HAS("another run");
    brg_checkpoint_unlock(h1);
    /* a file system that cannot lock: go on without, and say so; one that
     * refuses for permissions counts as held */
    flock_errno = ENOLCK;
    CHECK_OK(brg_checkpoint_lock(dir, &h2, note, sizeof note, NULL));
    CHECK(h2 == -1 && strstr(note, "without the lock") && strstr(note, dir));
    flock_errno = EACCES;
    CHECK_STATUS(brg_checkpoint_lock(dir, &h2, note, sizeof note, NULL), BRG_ERR_IO);
    CHECK_ERROR_HAS("another run");
    flock_errno = EIO;
    CHECK_STATUS(brg_checkpoint_lock(dir, &h2, note, sizeof note, NULL), BRG_ERR_IO);
    CHECK_ERROR_HAS("cannot lock");
    flock_errno = 0;
    /* the folders the lock made, marked by the length of the path that
     * names them: past a "..", the one before it too, and none that was
     * there (the second time, none) */
    char made_path[400];
    unsigned char marks[400];
    path_in(made_path, sizeof made_path, "mk-a/../mk-b/c");
    const size_t at = strlen(made_path) - strlen("mk-a/../mk-b/c");
    for (int pass = 0; pass < 2; pass++) {
        memset(marks, 0, sizeof marks);
        CHECK_OK(brg_checkpoint_lock(made_path, &h1, note, sizeof note, marks));
        int n_made = 0;
        for (size_t k = 0; k <= strlen(made_path); k++) n_made += marks[k];
        if (pass == 0) CHECK(n_made == 3 && marks[at + 4] && marks[at + 12] && marks[at + 14]);
        else CHECK(n_made == 0);
        brg_checkpoint_unlock(h1);
    }
    /* a "." or ".." that names a folder made is made too: the lock's own
     * folder (it marked none for "mk-c/d/.", whose lock then stayed) */
    path_in(made_path, sizeof made_path, "mk-c/d/./../d/.");
    const size_t at_dot = strlen(made_path) - strlen("mk-c/d/./../d/.");
    memset(marks, 0, sizeof marks);
    CHECK_OK(brg_checkpoint_lock(made_path, &h1, note, sizeof note, marks));
    int n_dot = 0;
    for (size_t k = 0; k <= strlen(made_path); k++) n_dot += marks[k];
    CHECK(n_dot == 6 && marks[at_dot + 4] && marks[at_dot + 6] && marks[at_dot + 8] && marks[at_dot + 11] &&
          marks[at_dot + 13] && marks[at_dot + 15]);
    brg_checkpoint_unlock(h1);
    CHECK_STATUS(brg_checkpoint_lock("", &h1, note, sizeof note, NULL), BRG_ERR_INVALID_ARGUMENT); /* read past it */
    CHECK_ERROR_HAS("an empty folder path");
    /* a checkpoint that cannot be read now but is not known damaged (here
     * its manifest is a link to itself) stays, named */
    char dir2[300];
    path_in(dir2, sizeof dir2, "prune-io");
    CHECK_OK(brg_checkpoint_save(r.pl, dir2, NULL, 2, path, sizeof path, left, sizeof left));
    CHECK(strstr(path, "step-0000000004") != NULL);
    snprintf(file, sizeof file, "%s/manifest.json", path);
    CHECK(unlink(file) == 0 && symlink("manifest.json", file) == 0);
    train(&r, m, 4, 5);
    CHECK_OK(brg_checkpoint_save(r.pl, dir2, NULL, 2, path, sizeof path, left, sizeof left));
    fprintf(stderr, "left: %s\n", left);
    CHECK(strstr(left, "step-0000000004") && strstr(left, "cannot open checkpoint manifest"));
    snprintf(file, sizeof file, "%s/step-0000000004", dir2);
    CHECK(exists(file));
    /* the same step saved again at a later point of the run (its epoch
     * evaluated and ended): the state stays, the manifest says where */
    CHECK_OK(brg_checkpoint_save(r.pl, dir2, "{\"epoch\": 2, \"epoch_step\": 0}", 2, path, sizeof path, left,
                                 sizeof left));
    CHECK_OK(brg_checkpoint_read(path, &man));
    CHECK(man.steps == 5 && man.run_json && strstr(man.run_json, "\"epoch\":2") != NULL);
    brg_checkpoint_manifest_free(&man);
    snprintf(file, sizeof file, "%s/manifest.json.tmp.%d", path, (int)getpid());
    CHECK(!exists(file));
    path_in(file, sizeof file, "no-such-folder");
    CHECK_OK(brg_checkpoint_count(file, &count, &newest));
    CHECK(count == 0 && newest == -1);
    run_close(&r);
}

static void test_initial_weights(const brg_model *m)
{
    const brg_optimizer_config opt = adam();
    run r;
    char file[300];
    path_in(file, sizeof file, "init.safetensors");
    if (!run_open(&r, m, 2, 2, BRG_SCHEDULE_1F1B, &opt)) return;
    /* the pipeline was made with seed 5 and has not trained */
    CHECK_OK(brg_model_save_initial_weights(m, 5, file));
    int64_t n0 = 0, n1 = 0;
    float *before = weights_of(&r, m, &n0);
    CHECK_OK(brg_pipeline_load_state(r.pl, file, BRG_STATE_WEIGHTS));
    float *after = weights_of(&r, m, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, (size_t)n0 * sizeof *before) == 0);
    free(before);
    free(after);
    brg_safetensors *f = NULL;
    CHECK_OK(brg_safetensors_open(file, &f));
    if (f) CHECK(strcmp(brg_safetensors_metadata(f, "brigade.seed"), "5") == 0);
    brg_safetensors_close(f);
    run_close(&r);
}

int main(void)
{
    snprintf(folder, sizeof folder, "%s/brigade-test-checkpoint-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    CHECK(mkdir(folder, 0777) == 0);
    brg_model *m = skip_model_bn(1); /* BatchNorm, dropout and a long skip */
    if (m && new_data(m, BATCH * STEPS_MAX, &stream_images, &stream_labels)) {
        test_resume_same_partition(m);
        test_resume_other_partition(m);
        test_bad_files(m);
        test_folders(m);
        test_manifest(m);
        test_prune(m);
        test_initial_weights(m);
    }
    brg_model_destroy(m);
    free(stream_images);
    free(stream_labels);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", folder);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", folder);
    TEST_EXIT();
}

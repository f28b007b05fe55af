/* The CPU calibration (docs/planning.md, "Times on CPU devices"): what
 * this machine's CPU takes per layer, for each layer kind and each part of
 * its work (forward, input gradient, weight gradient).
 *
 * A FLOP count alone predicts a CPU badly: BatchNorm, ReLU and pooling do
 * few FLOPs but stream memory, and took half of fmnist-cnn's step where
 * the convolutions ran at 70 GFLOP/s. So a small model with every layer
 * kind is measured (brg_profile_measure) and each kind, layout and part
 * gets its own rates, fitted over its layers; a layer of any model is then
 * timed from its FLOPs and sizes in the layout it will run in. The layout
 * matters as much as the kind: a 2x2 max pool forward took 0.5 ns per
 * input element channel-blocked and 1.1-1.5 plain, its backward 1.6
 * blocked. The rates are cached per machine, core share, convolution,
 * layout and brigade version in $XDG_CACHE_HOME/brigade/cpu-speed.json
 * (or ~/.cache/...), so only the first plan on a machine spends the few
 * seconds it takes. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brigade/device.h"
#include "brigade/info.h"
#include "base/conv-taps-rule.h"
#include "plan-impl.h"
#include "model/layers/layer-kind.h"
#include "model/layout-rule.h"
#include "model/zoo/zoo-impl.h"

#define SPEED_FORMAT "brigade-cpu-speed"
/* Bump when the calibration model or the way rates are taken changes:
 * older entries are then measured again. */
#define SPEED_VERSION 16
/* The calibration model runs at two micro-batch sizes, so that what a
 * layer costs per call tells apart from what it costs per sample. */
#define CALIBRATION_MICRO_BATCH 16
#define CALIBRATION_SMALL_BATCH 4

static const char *const part_key[3] = {"forward", "backward_input", "backward_weight"};
static const char *const layout_key[BRG_CPU_SPEED_LAYOUTS] = {"plain", "blocked", "taps"};
static const char *const term_suffix[BRG_CPU_SPEED_TERMS] = {"", "_per_size", "_per_param", "_per_call"};

/* A layer's time for one part is a x its FLOPs + b x a measure of its
 * size + c x its parameters + d per call (the terms, all rates >= 0):
 * - the size of a convolution or linear layer is the elements it reads
 *   and writes: with few channels (a first layer on RGB or grey input) its
 *   time follows the pixels more than the FLOPs (fmnist-cnn's first
 *   convolution's weight gradient took 4.7 ms for 29 MFLOP, its second's
 *   5.9 ms for 462);
 * - its parameters are read, reordered and written whatever the batch:
 *   ResNet-18's last stage (512 channels on 2x2 planes, micro-batches of 8)
 *   took 2.6x what FLOPs and elements alone predicted;
 * - the others' FLOPs follow their elements, so their size is their planes
 *   (samples x channels of inputs and output): each plane is a loop of its
 *   own, and BatchNorm on 16x16 planes took twice as long per element as
 *   on 32x32 ones. They have no parameters worth a term;
 * - every call costs the same whatever its size: starting the device's
 *   threads and oneDNN's primitive, the passes' set-up (fmnist-cnn on two
 *   devices in micro-batches of 4 ran 1.4x what the first three terms
 *   predicted from micro-batches of 16). */
static void layer_terms(const brg_model *m, int l, int u, double flops, double x[BRG_CPU_SPEED_TERMS])
{
    const brg_layer *ly = brg_model_get_layer(m, l);
    const int weighted = ly->desc.kind == BRG_LAYER_CONV2D || ly->desc.kind == BRG_LAYER_LINEAR;
    const brg_model_tensor *t = brg_model_get_tensor(m, ly->output);
    double size = weighted ? brg_layer_elems(m, ly->output) : (double)t->c;
    for (int i = 0; i < ly->n_inputs; i++) {
        t = brg_model_get_tensor(m, ly->inputs[i]);
        size += weighted ? brg_layer_elems(m, ly->inputs[i]) : (double)t->c;
    }
    x[0] = flops;
    x[1] = size * (double)u;
    x[2] = weighted ? (double)ly->trainable_params : 0.0;
    x[3] = 1.0;
}

/* Whether layer l runs blocked, by the layouts of its model's tensors:
 * its output's, or its input's for a kind that reads blocked and writes
 * plain (global average pooling) and for a convolution (its kernels on a
 * plain input are those of first layers, on few channels). A convolution
 * on small planes runs by its kernel taps in either layout. */
static int layer_layout(const brg_model *m, const int *layout, int l)
{
    const brg_layer *ly = brg_model_get_layer(m, l);
    const brg_model_tensor *y = brg_model_get_tensor(m, ly->output);
    if (ly->desc.kind == BRG_LAYER_CONV2D && brg_conv_by_taps(y->h, y->w, ly->desc.kernel_h, ly->desc.kernel_w))
        return BRG_CPU_SPEED_TAPS;
    const int by_input = brg_layer_kind_info_of(ly->desc.kind)->blocks == BRG_BLOCKS_INPUT ||
                         brg_layer_kind_info_of(ly->desc.kind)->blocks == BRG_BLOCKS_EACH;
    const int t = by_input ? ly->inputs[0] : ly->output;
    return layout[t] ? BRG_CPU_SPEED_BLOCKED : BRG_CPU_SPEED_PLAIN;
}

/* The layouts of m's tensors on a device with this channel block, as one
 * stage of the whole model (or a pipeline whose edges are blocked) has
 * them; NULL when out of memory. */
static int *model_layouts(const brg_model *m, int block)
{
    int *layout = brg_malloc((size_t)brg_model_tensor_count(m) * sizeof *layout, "the layer layouts");
    if (layout && brg_model_choose_layouts(m, block, 0, brg_model_layer_count(m), NULL, layout) != BRG_OK) {
        free(layout);
        layout = NULL;
    }
    return layout;
}

/* conv3x3 (pad 1, no bias) + BatchNorm (+ ReLU), the zoo's block
 * ("<name>.conv", "<name>.bn", "<name>.relu"), the last one's name in out. */
static brg_status conv_bn(brg_model *m, const char *name, const char *input, int channels, int relu, char *out)
{
    const brg_zoo_conv conv = {channels, 3, 3, 1, 1, 1};
    const brg_zoo_bn bn = {1e-5f, 1, 1};
    return brg_zoo_conv_bn(m, name, "", input, &conv, &bn, relu, out);
}

/* A model with every layer kind at sizes between fmnist-cnn's and
 * ResNet's, in both layouts: convolutions from 3 to 512 channels, 3x3 and
 * 1x1, on planes from 64x64 down to 2x2 (three by kernel taps: 4x4, 2x2
 * twice, one of them 512 -> 512), BatchNorm, ReLU, pooling, add and
 * concat on planes from 64x64 down to 4x4, channel-blocked and (with 20
 * channels, or tied to a linear layer or an upsampling) plain, and linear
 * layers from 64 to 8192 inputs. */
static brg_status rgb_model(brg_model **out)
{
    brg_model *m = NULL;
    brg_status ret = BRG_OK;
    char r1[BRG_NAME_MAX], r2[BRG_NAME_MAX], b3[BRG_NAME_MAX], r5[BRG_NAME_MAX], r6[BRG_NAME_MAX],
        r7[BRG_NAME_MAX], hr1[BRG_NAME_MAX], hb2[BRG_NAME_MAX];
    BRG_CHECK(brg_model_create("cpu-calibration", 3, 64, 64, &m));
    BRG_CHECK_GOTO(brg_model_begin_block(m, "stem"), ret, fail);
    BRG_CHECK_GOTO(conv_bn(m, "c1", "input", 32, 1, r1), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_maxpool(m, "p1", r1, 2, 2, 0), ret, fail);
    BRG_CHECK_GOTO(brg_model_begin_block(m, "body"), ret, fail);
    BRG_CHECK_GOTO(conv_bn(m, "c2", "p1", 64, 1, r2), ret, fail);
    BRG_CHECK_GOTO(conv_bn(m, "c3", r2, 64, 0, b3), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_add(m, "a3", b3, r2), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_relu(m, "r3", "a3"), ret, fail);
    BRG_CHECK_GOTO(brg_model_begin_block(m, "mix"), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_conv2d(m, "c4", "r3", 32, 1, 1, 1, 1, 0, 0, 0), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_avgpool(m, "ap", "r3", 3, 1, 1, 0), ret, fail);
    const char *cat[] = {"c4", "ap"};
    BRG_CHECK_GOTO(brg_model_add_concat(m, "cat", cat, 2), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_maxpool(m, "p2", "cat", 2, 2, 0), ret, fail);
    BRG_CHECK_GOTO(brg_model_begin_block(m, "deep"), ret, fail);
    BRG_CHECK_GOTO(conv_bn(m, "c5", "p2", 128, 1, r5), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_maxpool(m, "p4", r5, 2, 2, 0), ret, fail);
    BRG_CHECK_GOTO(conv_bn(m, "c6", "p4", 128, 1, r6), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_upsample(m, "up", r6, 2), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_maxpool(m, "p5", r6, 2, 2, 0), ret, fail);
    BRG_CHECK_GOTO(conv_bn(m, "c7", "p5", 256, 1, r7), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_maxpool(m, "p6", r7, 2, 2, 0), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_conv2d(m, "c8", "p6", 512, 3, 3, 1, 1, 1, 1, 0), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_conv2d(m, "c9", "c8", 512, 3, 3, 1, 1, 1, 1, 0), ret, fail);
    BRG_CHECK_GOTO(brg_model_begin_block(m, "plain"), ret, fail);
    BRG_CHECK_GOTO(conv_bn(m, "h1", "p1", 20, 1, hr1), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_maxpool(m, "hp1", hr1, 2, 2, 0), ret, fail);
    BRG_CHECK_GOTO(conv_bn(m, "h2", "hp1", 20, 0, hb2), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_add(m, "ha2", hb2, "hp1"), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_relu(m, "hr2", "ha2"), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_avgpool(m, "hap", "hr2", 3, 1, 1, 0), ret, fail);
    const char *hcat[] = {"hap", "hr2"};
    BRG_CHECK_GOTO(brg_model_add_concat(m, "hcat", hcat, 2), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_maxpool(m, "p3", "hcat", 2, 2, 0), ret, fail);
    BRG_CHECK_GOTO(brg_model_begin_block(m, "head"), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_linear(m, "fc1", "p3", 512, 1), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_global_avgpool(m, "gapu", "up"), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_global_avgpool(m, "gap", r5), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_global_avgpool(m, "gap7", r7), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_global_avgpool(m, "gap8", "c9"), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_linear(m, "fc5", "gap8", 512, 1), ret, fail);
    const char *head[] = {"fc1", "gapu", "gap", "gap7", "fc5"};
    BRG_CHECK_GOTO(brg_model_add_concat(m, "cat2", head, 5), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_relu(m, "r4", "cat2"), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_dropout(m, "drop", "r4", 0.25f), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_linear(m, "fc3", "drop", 256, 1), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_linear(m, "fc4", "fc3", 64, 1), ret, fail);
    /* The last layer's times hold the loss's: the fit leaves it out. */
    BRG_CHECK_GOTO(brg_model_add_linear(m, "fc2", "fc4", 10, 1), ret, fail);
    BRG_CHECK_GOTO(brg_model_finalize(m, NULL), ret, fail);
    *out = m;
    return BRG_OK;
fail:
    brg_model_destroy(m);
    return ret;
}

/* A first layer on one channel (grey images, fmnist-cnn's), whose
 * kernels differ from those on three: a small model around it. */
static brg_status grey_model(brg_model **out)
{
    brg_model *m = NULL;
    brg_status ret = BRG_OK;
    char r1[BRG_NAME_MAX];
    BRG_CHECK(brg_model_create("cpu-calibration-grey", 1, 64, 64, &m));
    BRG_CHECK_GOTO(brg_model_begin_block(m, "grey"), ret, fail);
    BRG_CHECK_GOTO(conv_bn(m, "g1", "input", 16, 1, r1), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_maxpool(m, "gp1", r1, 2, 2, 0), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_conv2d(m, "g2", "gp1", 32, 3, 3, 1, 1, 1, 1, 0), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_relu(m, "gr2", "g2"), ret, fail);
    BRG_CHECK_GOTO(brg_model_begin_block(m, "head"), ret, fail);
    BRG_CHECK_GOTO(brg_model_add_global_avgpool(m, "gap", "gr2"), ret, fail);
    /* The last layer's times hold the loss's: the fit leaves it out. */
    BRG_CHECK_GOTO(brg_model_add_linear(m, "fc", "gap", 10, 1), ret, fail);
    BRG_CHECK_GOTO(brg_model_finalize(m, NULL), ret, fail);
    *out = m;
    return BRG_OK;
fail:
    brg_model_destroy(m);
    return ret;
}

/* Layer l's FLOPs at u samples (as plan/cost.c counts them). */
static void layer_flops(const brg_model *m, int l, int u, double f[3])
{
    const brg_layer *ly = brg_model_get_layer(m, l);
    const int wants_dx = ly->inputs[0] != brg_model_input(m);
    f[0] = f[1] = f[2] = 0.0;
    brg_layer_kind_info_of(ly->desc.kind)->flops(ly, m, (double)u, wants_dx, &f[0], &f[1], &f[2]);
}

/* The cache entry's key: what the rates depend on. */
static void speed_key(int sharing_devices, char *key, size_t size)
{
    brg_system_info info;
    if (brg_system_info_get(&info) != BRG_OK) memset(&info, 0, sizeof info);
    const char *blas = getenv("OPENBLAS_NUM_THREADS"), *omp = getenv("OMP_NUM_THREADS");
    /* The versions first: a key cut short still names them. */
    snprintf(key, size, "calibration %d; brigade %s; %s; %d cores; %d sharing; %s convolution; %s layout; "
             "OPENBLAS_NUM_THREADS=%.16s OMP_NUM_THREADS=%.16s",
             SPEED_VERSION, brg_version(), info.cpu_model[0] ? info.cpu_model : "unknown CPU", info.pus,
             sharing_devices, brg_cpu_convolution(), brg_cpu_layout(), blas ? blas : "", omp ? omp : "");
}

/* $XDG_CACHE_HOME/brigade/cpu-speed.json, else ~/.cache/brigade/...; 0
 * when neither is set. With make, the folders are created. */
static int cache_path(char *path, size_t size, int make)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[448];
    int n;
    if (xdg && xdg[0]) n = snprintf(dir, sizeof dir, "%s", xdg);
    else if (home && home[0]) n = snprintf(dir, sizeof dir, "%s/.cache", home);
    else return 0;
    if (n < 0 || (size_t)n + sizeof "/brigade" > sizeof dir) return 0; /* no cache rather than the wrong folder */
    if (make) mkdir(dir, 0755);
    strcat(dir, "/brigade");
    if (make) mkdir(dir, 0755);
    n = snprintf(path, size, "%s/cpu-speed.json", dir);
    return n > 0 && (size_t)n < size;
}

/* A rate's key in a cache entry: "forward", "backward_input_per_size"... */
static const char *rate_name(int part, int term, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s", part_key[part], term_suffix[term]);
    return buf;
}

/* The cached entry for key, if the cache has one that reads well. */
static int cache_read(const char *path, const char *key, brg_cpu_speed *s)
{
    json_t *root = json_load_file(path, 0, NULL);
    if (!root) return 0;
    int found = 0;
    json_t *entries = json_object_get(root, "entries"), *e = NULL;
    const char *fmt = json_string_value(json_object_get(root, "format"));
    if (fmt && strcmp(fmt, SPEED_FORMAT) == 0 && json_is_object(entries)) e = json_object_get(entries, key);
    if (json_is_object(e)) {
        json_t *block = json_object_get(e, "block");
        found = json_is_integer(block) && json_integer_value(block) >= 0 && json_integer_value(block) <= 64;
        if (found) s->block = (int)json_integer_value(block);
        for (int k = 0; k < BRG_LAYER_KIND_COUNT && found; k++) {
            json_t *kind = json_object_get(e, brg_layer_kind_info_of((brg_layer_kind)k)->name);
            for (int lay = 0; lay < BRG_CPU_SPEED_LAYOUTS && found; lay++) {
                json_t *rates = json_object_get(kind, layout_key[lay]);
                for (int p = 0; p < 3 && found; p++)
                    for (int j = 0; j < BRG_CPU_SPEED_TERMS && found; j++) {
                        char name[64];
                        json_t *v = json_object_get(rates, rate_name(p, j, name, sizeof name));
                        found = json_is_number(v) && json_number_value(v) >= 0.0;
                        if (found) s->rate[k][lay][p][j] = json_number_value(v);
                    }
            }
        }
    }
    json_decref(root);
    return found;
}

/* Add the entry to the cache: read it again, set the key, write a
 * temporary file and rename it over, so that processes planning at once
 * never read half a file. Returns whether it was written; failing is not
 * an error: the next plan measures again. */
static int cache_write(const char *path, const char *key, const brg_cpu_speed *s)
{
    json_t *root = json_load_file(path, 0, NULL);
    if (!json_is_object(root) || !json_is_object(json_object_get(root, "entries"))) {
        json_decref(root);
        root = json_object();
        if (!root) return 0;
        json_object_set_new(root, "format", json_string(SPEED_FORMAT));
        json_object_set_new(root, "entries", json_object());
    }
    json_t *e = json_object();
    if (e) json_object_set_new(e, "block", json_integer(s->block));
    for (int k = 0; e && k < BRG_LAYER_KIND_COUNT; k++) {
        json_t *kind = json_object();
        for (int lay = 0; kind && lay < BRG_CPU_SPEED_LAYOUTS; lay++) {
            json_t *rates = json_object();
            for (int p = 0; rates && p < 3; p++)
                for (int j = 0; j < BRG_CPU_SPEED_TERMS; j++) {
                    char name[64];
                    json_object_set_new(rates, rate_name(p, j, name, sizeof name), json_real(s->rate[k][lay][p][j]));
                }
            json_object_set_new(kind, layout_key[lay], rates);
        }
        json_object_set_new(e, brg_layer_kind_info_of((brg_layer_kind)k)->name, kind);
    }
    if (e) json_object_set_new(json_object_get(root, "entries"), key, e);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    const int written = json_dump_file(root, tmp, JSON_INDENT(1)) == 0 && rename(tmp, path) == 0;
    if (!written) remove(tmp);
    json_decref(root);
    return written;
}

/* Solve the n x n system a x = b (n <= BRG_CPU_SPEED_TERMS) by Gaussian
 * elimination with partial pivoting; 0 when it is singular. */
static int solve(int n, double a[BRG_CPU_SPEED_TERMS][BRG_CPU_SPEED_TERMS], double *b, double *x)
{
    /* A pivot this small next to the matrix is rounding noise: the terms
     * cannot be told apart. */
    double scale = 0.0;
    for (int r = 0; r < n; r++)
        for (int c = 0; c < n; c++) scale = fmax(scale, fabs(a[r][c]));
    for (int c = 0; c < n; c++) {
        int piv = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c])) piv = r;
        if (!(fabs(a[piv][c]) > 1e-10 * scale)) return 0;
        for (int k = 0; k < n; k++) {
            const double tmp = a[c][k];
            a[c][k] = a[piv][k];
            a[piv][k] = tmp;
        }
        const double tb = b[c];
        b[c] = b[piv];
        b[piv] = tb;
        for (int r = c + 1; r < n; r++) {
            const double f = a[r][c] / a[c][c];
            for (int k = c; k < n; k++) a[r][k] -= f * a[c][k];
            b[r] -= f * b[c];
        }
    }
    for (int c = n - 1; c >= 0; c--) {
        double v = b[c];
        for (int k = c + 1; k < n; k++) v -= a[c][k] * x[k];
        x[c] = v / a[c][c];
        if (!isfinite(x[c])) return 0;
    }
    return 1;
}

/* The rates of one kind and part from its n layers' times t[i] and terms
 * x[i]: least squares on the relative error (a small layer counts as much
 * as a large one), over every subset of the terms, keeping the best fit
 * whose rates are all >= 0 (non-negative least squares by enumeration: 15
 * subsets at most). Each term is scaled to its largest value first, so
 * FLOPs (1e9) and parameters (1e5) solve alike. */
static void fit_rates(const double *t, double (*x)[BRG_CPU_SPEED_TERMS], int n, double *rate)
{
    double scale[BRG_CPU_SPEED_TERMS] = {0};
    for (int i = 0; i < n; i++)
        for (int j = 0; j < BRG_CPU_SPEED_TERMS; j++) scale[j] = fmax(scale[j], x[i][j]);
    double best = INFINITY;
    for (int j = 0; j < BRG_CPU_SPEED_TERMS; j++) rate[j] = 0.0;
    for (unsigned set = 1; set < (1u << BRG_CPU_SPEED_TERMS); set++) {
        int idx[BRG_CPU_SPEED_TERMS], k = 0;
        for (int j = 0; j < BRG_CPU_SPEED_TERMS; j++)
            if (set & (1u << j)) {
                if (!(scale[j] > 0.0)) goto next;
                idx[k++] = j;
            }
        if (k > n) continue; /* fewer layers than terms: any fit is exact and says nothing */
        double a[BRG_CPU_SPEED_TERMS][BRG_CPU_SPEED_TERMS] = {{0}}, b[BRG_CPU_SPEED_TERMS] = {0},
               c[BRG_CPU_SPEED_TERMS] = {0};
        for (int i = 0; i < n; i++) {
            double row[BRG_CPU_SPEED_TERMS];
            for (int q = 0; q < k; q++) row[q] = x[i][idx[q]] / scale[idx[q]] / t[i];
            for (int q = 0; q < k; q++) {
                b[q] += row[q];
                for (int r = 0; r < k; r++) a[q][r] += row[q] * row[r];
            }
        }
        if (!solve(k, a, b, c)) continue;
        double res = 0.0;
        for (int q = 0; q < k; q++)
            if (c[q] < 0.0) goto next;
        for (int i = 0; i < n; i++) {
            double pred = 0.0;
            for (int q = 0; q < k; q++) pred += c[q] * x[i][idx[q]] / scale[idx[q]];
            res += (pred / t[i] - 1.0) * (pred / t[i] - 1.0);
        }
        if (res < best) {
            best = res;
            for (int j = 0; j < BRG_CPU_SPEED_TERMS; j++) rate[j] = 0.0;
            for (int q = 0; q < k; q++) rate[idx[q]] = c[q] / scale[idx[q]];
        }
    next:;
    }
}

/* This process's CPU device's channel block (0: plain layouts only). */
static int cpu_block(void)
{
    brg_device *dev = NULL;
    if (brg_device_create_cpu((size_t)1 << 16, 0, &dev) != BRG_OK) return 0;
    const int b = brg_device_channel_block(dev);
    brg_device_destroy(dev);
    return b;
}

/* The calibration: its models measured at each size, and the layouts
 * their tensors had. */
#define CALIBRATION_MODELS 2
#define CALIBRATION_SIZES 2
typedef struct calibration {
    brg_model *model[CALIBRATION_MODELS];
    int *layout[CALIBRATION_MODELS];
    brg_profile *profile[CALIBRATION_MODELS][CALIBRATION_SIZES];
} calibration;
static const int calibration_sizes[CALIBRATION_SIZES] = {CALIBRATION_MICRO_BATCH, CALIBRATION_SMALL_BATCH};

static void calibration_free(calibration *c)
{
    for (int i = 0; i < CALIBRATION_MODELS; i++) {
        for (int r = 0; r < CALIBRATION_SIZES; r++) brg_profile_destroy(c->profile[i][r]);
        free(c->layout[i]);
        brg_model_destroy(c->model[i]);
    }
}

static brg_status calibration_measure(int sharing_devices, const brg_optimizer_config *optimizer, int block,
                                      calibration *c)
{
    memset(c, 0, sizeof *c);
    brg_status ret = rgb_model(&c->model[0]);
    if (ret == BRG_OK) ret = grey_model(&c->model[1]);
    for (int i = 0; ret == BRG_OK && i < CALIBRATION_MODELS; i++) {
        c->layout[i] = model_layouts(c->model[i], block);
        if (!c->layout[i]) ret = BRG_ERR_HOST_MEMORY;
        for (int r = 0; ret == BRG_OK && r < CALIBRATION_SIZES; r++)
            ret = brg_profile_measure(c->model[i], calibration_sizes[r], sharing_devices, optimizer, &c->profile[i][r]);
    }
    if (ret != BRG_OK) calibration_free(c);
    return ret;
}

/* The times t[] and terms x[] of every measured layer of kind k in layout
 * lay for part q; returns how many. */
static int gather(const calibration *c, int k, int lay, int q, double *t, double (*x)[BRG_CPU_SPEED_TERMS])
{
    int n = 0;
    for (int i = 0; i < CALIBRATION_MODELS; i++) {
        const brg_model *m = c->model[i];
        const int L = brg_model_layer_count(m);
        for (int r = 0; r < CALIBRATION_SIZES; r++)
            for (int l = 0; l < L - 1; l++) { /* the last layer's times hold the loss's */
                if (brg_model_get_layer(m, l)->desc.kind != (brg_layer_kind)k ||
                    layer_layout(m, c->layout[i], l) != lay)
                    continue;
                const brg_profile *p = c->profile[i][r];
                double f[3];
                layer_flops(m, l, calibration_sizes[r], f);
                const double time = q == 0 ? p->fwd[l] : q == 1 ? p->bwd_in[l] : p->bwd_w[l];
                if (!(f[q] > 0.0) || !(time > 0.0)) continue;
                t[n] = time;
                layer_terms(m, l, calibration_sizes[r], f[q], x[n]);
                n++;
            }
    }
    return n;
}

/* Measure the calibration models and fit each kind's rates per layout and
 * part over their layers. A part a kind does no FLOPs in keeps rates 0 (it
 * has no time either); a kind with no layer of its own in one layout
 * (everything is plain without a block) takes the nearest layout's rates. */
static brg_status calibrate(int sharing_devices, const brg_optimizer_config *optimizer, brg_cpu_speed *s)
{
    calibration c;
    s->block = cpu_block();
    BRG_CHECK(calibration_measure(sharing_devices, optimizer, s->block, &c));
    int points = 0;
    for (int i = 0; i < CALIBRATION_MODELS; i++) points += CALIBRATION_SIZES * brg_model_layer_count(c.model[i]);
    double *t = brg_malloc((size_t)points * sizeof *t, "the calibration");
    double(*x)[BRG_CPU_SPEED_TERMS] = brg_malloc((size_t)points * sizeof *x, "the calibration");
    brg_status ret = t && x ? BRG_OK : BRG_ERR_HOST_MEMORY;
    for (int k = 0; ret == BRG_OK && k < BRG_LAYER_KIND_COUNT; k++)
        for (int q = 0; q < 3; q++) {
            int fitted[BRG_CPU_SPEED_LAYOUTS] = {0};
            for (int lay = 0; lay < BRG_CPU_SPEED_LAYOUTS; lay++) {
                const int n = gather(&c, k, lay, q, t, x);
                fit_rates(t, x, n, s->rate[k][lay][q]);
                fitted[lay] = n > 0;
            }
            /* where a layout has no layer: the nearest that has */
            static const int nearest[BRG_CPU_SPEED_LAYOUTS][2] = {
                [BRG_CPU_SPEED_PLAIN] = {BRG_CPU_SPEED_BLOCKED, BRG_CPU_SPEED_TAPS},
                [BRG_CPU_SPEED_BLOCKED] = {BRG_CPU_SPEED_PLAIN, BRG_CPU_SPEED_TAPS},
                [BRG_CPU_SPEED_TAPS] = {BRG_CPU_SPEED_BLOCKED, BRG_CPU_SPEED_PLAIN},
            };
            for (int lay = 0; lay < BRG_CPU_SPEED_LAYOUTS; lay++)
                for (int i = 0; i < 2 && !fitted[lay]; i++)
                    if (fitted[nearest[lay][i]]) {
                        memcpy(s->rate[k][lay][q], s->rate[k][nearest[lay][i]][q], sizeof s->rate[k][lay][q]);
                        break;
                    }
        }
    free(x);
    free(t);
    calibration_free(&c);
    return ret;
}

/* The rates this process has, by key: the cache file may be missing or
 * unwritable, and a bench plans once per combination. One calibration at a
 * time: each sets the process's thread counts (brg_devices_share_cores). */
static pthread_mutex_t speed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char key[512];
    brg_cpu_speed speed;
} known;

brg_status brg_cpu_speed_get(int sharing_devices, const brg_optimizer_config *optimizer, brg_cpu_speed *s)
{
    memset(s, 0, sizeof *s);
    if (sharing_devices < 1) sharing_devices = 1;
    char key[512];
    speed_key(sharing_devices, key, sizeof key);
    pthread_mutex_lock(&speed_lock);
    brg_status st = BRG_OK;
    if (strcmp(known.key, key) == 0) {
        *s = known.speed;
    } else if (cache_path(s->cache, sizeof s->cache, 0) && cache_read(s->cache, key, s)) {
        s->cached = 1;
    } else {
        st = calibrate(sharing_devices, optimizer, s);
        if (st == BRG_OK && !(s->cache[0] && cache_path(s->cache, sizeof s->cache, 1) && cache_write(s->cache, key, s)))
            s->cache[0] = '\0'; /* measured, not cached */
    }
    if (st == BRG_OK) {
        snprintf(known.key, sizeof known.key, "%s", key);
        known.speed = *s;
        known.speed.cached = s->cache[0] != '\0'; /* the next plan of this process has them as from the file */
    }
    pthread_mutex_unlock(&speed_lock);
    return st == BRG_OK ? BRG_OK : brg_error_context(st, "calibrating this CPU");
}

brg_status brg_cpu_speed_profile(const brg_model *model, int u, const brg_cpu_speed *s, brg_profile **out)
{
    *out = NULL;
    const int L = brg_model_layer_count(model);
    brg_profile *p = brg_profile_new(L, u);
    int *layout = p ? model_layouts(model, s->block) : NULL;
    if (!layout) {
        brg_profile_destroy(p);
        return BRG_ERR_HOST_MEMORY;
    }
    for (int l = 0; l < L; l++) {
        const int k = brg_model_get_layer(model, l)->desc.kind, lay = layer_layout(model, layout, l);
        double f[3], t[3];
        layer_flops(model, l, u, f);
        for (int q = 0; q < 3; q++) {
            double x[BRG_CPU_SPEED_TERMS];
            layer_terms(model, l, u, f[q], x);
            t[q] = 0.0;
            for (int j = 0; f[q] > 0.0 && j < BRG_CPU_SPEED_TERMS; j++) t[q] += x[j] * s->rate[k][lay][q][j];
        }
        p->fwd[l] = t[0];
        p->bwd_in[l] = t[1];
        p->bwd_w[l] = t[2];
    }
    free(layout);
    *out = p;
    return BRG_OK;
}

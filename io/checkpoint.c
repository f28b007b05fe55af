/* A model's training state to and from safetensors files, by layer and
 * parameter name, whatever the partition (brigade/checkpoint.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/internal.h"
#include "brigade/checkpoint.h"
#include "brigade/safetensors.h"
#include "checkpoint-impl.h"

#define STATE_NAME_MAX (2 * BRG_NAME_MAX + 32)

/* One tensor of the state: parameter `param` of `layer`, or its optimizer
 * tensor `which` (>= 0). */
typedef struct state_entry {
    char name[STATE_NAME_MAX];
    int layer, param, which;
    brg_param_info info;
} state_entry;

const char *brg_optimizer_slot_name(const brg_optimizer_config *opt, int which)
{
    if (!opt || which < 0 || which >= brg_optimizer_state_count(opt)) return NULL;
    if (opt->kind == BRG_OPTIMIZER_ADAM) return which == 0 ? "adam_m" : "adam_v";
    return "sgd_momentum";
}

static const char *parts_name(unsigned parts)
{
    switch (parts) {
    case BRG_STATE_WEIGHTS: return "weights";
    case BRG_STATE_OPTIMIZER: return "optimizer";
    default: return "weights+optimizer";
    }
}

static brg_status check_parts(unsigned parts, const char *what)
{
    if (parts == 0 || (parts & ~(BRG_STATE_WEIGHTS | BRG_STATE_OPTIMIZER)))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: parts %#x; give BRG_STATE_WEIGHTS, BRG_STATE_OPTIMIZER or both",
                         what, parts);
    return BRG_OK;
}

/* The tensors `parts` names, in the model's order (opt: the optimizer's
 * tensors; NULL with weights only). */
static brg_status list_state(const brg_model *m, const brg_optimizer_config *opt, unsigned parts, state_entry **out,
                             int *count)
{
    *out = NULL;
    *count = 0;
    const int slots = (parts & BRG_STATE_OPTIMIZER) && opt ? brg_optimizer_state_count(opt) : 0;
    int n = 0, room = 0;
    state_entry *list = NULL;
    for (int l = 0; l < brg_model_layer_count(m); l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        for (int i = 0; i < brg_layer_param_count(ly, m); i++) {
            brg_param_info info;
            brg_status st = brg_layer_param(ly, m, i, &info);
            if (st != BRG_OK) {
                free(list);
                return st;
            }
            for (int w = -1; w < (info.trainable ? slots : 0); w++) {
                if (w < 0 && !(parts & BRG_STATE_WEIGHTS)) continue;
                if (n == room) {
                    room = room ? 2 * room : 64;
                    state_entry *more = realloc(list, (size_t)room * sizeof *list);
                    if (!more) {
                        free(list);
                        return brg_error(BRG_ERR_HOST_MEMORY, "no host memory for the list of %d state tensors", room);
                    }
                    list = more;
                }
                state_entry *e = &list[n++];
                e->layer = l;
                e->param = i;
                e->which = w;
                e->info = info;
                if (w < 0) snprintf(e->name, sizeof e->name, "%s.%s", ly->name, info.name);
                else snprintf(e->name, sizeof e->name, "%s.%s.%s", ly->name, info.name,
                              brg_optimizer_slot_name(opt, w));
            }
        }
    }
    *out = list;
    *count = n;
    return BRG_OK;
}

static size_t entry_bytes(const state_entry *e) { return (size_t)e->info.count * sizeof(float); }

/* Write list[0..n) with their values in host (laid out in order). */
static brg_status write_file(const char *path, const brg_model *m, unsigned parts, const state_entry *list, int n,
                             const float *host, const char *const *keys, const char *const *values, int n_meta)
{
    brg_safetensor *ts = brg_calloc(n > 0 ? (size_t)n : 1, sizeof *ts, "the tensor list of a state file");
    const char **k = brg_calloc((size_t)n_meta + 2, sizeof *k, "the metadata of a state file");
    const char **v = brg_calloc((size_t)n_meta + 2, sizeof *v, "the metadata of a state file");
    brg_status st = BRG_ERR_HOST_MEMORY;
    if (ts && k && v) {
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            ts[i].name = list[i].name;
            ts[i].dtype = BRG_F32;
            ts[i].ndim = list[i].info.ndim;
            for (int d = 0; d < list[i].info.ndim; d++) ts[i].shape[d] = list[i].info.shape[d];
            ts[i].data = host + at;
            ts[i].bytes = entry_bytes(&list[i]);
            at += (size_t)list[i].info.count;
        }
        k[0] = "brigade.model";
        v[0] = brg_model_name(m);
        k[1] = "brigade.parts";
        v[1] = parts_name(parts);
        for (int i = 0; i < n_meta; i++) {
            k[i + 2] = keys[i];
            v[i + 2] = values[i];
        }
        st = brg_safetensors_write(path, ts, n, k, v, n_meta + 2);
    }
    free(ts);
    free(k);
    free(v);
    return st;
}

static size_t total_floats(const state_entry *list, int n)
{
    size_t t = 0;
    for (int i = 0; i < n; i++) t += (size_t)list[i].info.count;
    return t;
}

static brg_status check_meta(const char *const *keys, const char *const *values, int n_meta, const char *what)
{
    if (n_meta < 0 || (n_meta > 0 && (!keys || !values)))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: %d metadata pairs without keys or values", what, n_meta);
    return BRG_OK;
}

int brg_state_writer(const brg_pipeline *pl)
{
    const brg_world *w = brg_pipeline_world(pl);
    return brg_world_rank(w) == 0 && brg_world_replica(w) == 0;
}

brg_status brg_state_together(const brg_pipeline *pl, brg_status st, const char *what)
{
    const int any = brg_world_any(brg_pipeline_world(pl), st != BRG_OK);
    if (st != BRG_OK || !any) return st;
    return brg_error(BRG_ERR_IO, "%s failed on another rank (its own message says why)", what);
}

static size_t largest_floats(const state_entry *list, int n)
{
    size_t most = 0;
    for (int i = 0; i < n; i++)
        if ((size_t)list[i].info.count > most) most = (size_t)list[i].info.count;
    return most;
}

brg_status brg_pipeline_save_state(const brg_pipeline *pl, const char *path, unsigned parts,
                                   const char *const *keys, const char *const *values, int n_meta)
{
    if (!pl || !path)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_save_state: pipeline and path must be given");
    BRG_CHECK(check_parts(parts, "brg_pipeline_save_state"));
    BRG_CHECK(check_meta(keys, values, n_meta, "brg_pipeline_save_state"));
    /* Every rank takes part in the same collective calls whatever fails
     * where; only the writer holds the whole state (the others, one
     * tensor on its way). */
    const brg_pipeline_desc *desc = brg_pipeline_get_desc(pl);
    const int writer = brg_state_writer(pl);
    state_entry *list = NULL;
    int n = 0;
    float *host = NULL;
    brg_status st = list_state(desc->model, &desc->optimizer, parts, &list, &n);
    if (st == BRG_OK) {
        const size_t floats = writer ? total_floats(list, n) : largest_floats(list, n);
        host = brg_malloc(floats ? floats * sizeof(float) : 1, "the state on its way to a file");
        if (!host) st = BRG_ERR_HOST_MEMORY;
    }
    st = brg_state_together(pl, st, "making room for the state");
    if (st != BRG_OK) { /* the same on every rank */
        free(host);
        free(list);
        return st;
    }
    /* Collective: every tensor on every rank, even after a failure here
     * (the holder still sends, so that rank 0 is not left waiting). */
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const brg_status got = brg_pipeline_read_state(pl, list[i].layer, list[i].param, list[i].which,
                                                       host + (writer ? at : 0), (size_t)list[i].info.count);
        if (got != BRG_OK && st == BRG_OK) st = brg_error_context(got, "saving '%s' to %s", list[i].name, path);
        at += (size_t)list[i].info.count;
    }
    st = brg_state_together(pl, st, "reading the state");
    if (st == BRG_OK && writer) st = write_file(path, desc->model, parts, list, n, host, keys, values, n_meta);
    st = brg_state_together(pl, st, "writing the state file");
    free(host);
    free(list);
    return st;
}

brg_status brg_model_save_weights(const brg_model *m, brg_weights_fill_fn fill, void *ctx, const char *path,
                                  const char *const *keys, const char *const *values, int n_meta)
{
    if (!m || !fill || !path)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_save_weights: model, fill and path must be given");
    if (!brg_model_is_final(m))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is not finalized", brg_model_name(m));
    BRG_CHECK(check_meta(keys, values, n_meta, "brg_model_save_weights"));
    state_entry *list = NULL;
    int n = 0;
    BRG_CHECK(list_state(m, NULL, BRG_STATE_WEIGHTS, &list, &n));
    const size_t floats = total_floats(list, n);
    float *host = brg_malloc(floats ? floats * sizeof(float) : 1, "the weights on their way to a file");
    brg_status st = host ? BRG_OK : BRG_ERR_HOST_MEMORY;
    size_t at = 0;
    for (int i = 0; i < n && st == BRG_OK; i++) {
        st = fill(ctx, list[i].layer, list[i].param, host + at);
        at += (size_t)list[i].info.count;
    }
    if (st == BRG_OK) st = write_file(path, m, BRG_STATE_WEIGHTS, list, n, host, keys, values, n_meta);
    free(host);
    free(list);
    return st;
}

typedef struct initial_weights {
    const brg_model *model;
    uint64_t seed;
} initial_weights;

static brg_status fill_initial(void *ctx, int layer, int param, float *values)
{
    const initial_weights *w = ctx;
    return brg_layer_init_param(brg_model_get_layer(w->model, layer), w->model, param, w->seed, values);
}

brg_status brg_model_save_initial_weights(const brg_model *m, uint64_t seed, const char *path)
{
    if (!m || !path)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_save_initial_weights: model and path must be given");
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    const char *key = "brigade.seed", *value = seed_text;
    initial_weights w = {m, seed};
    return brg_model_save_weights(m, fill_initial, &w, path, &key, &value, 1);
}

/* Every tensor of list is in file, F32 of its shape, and nothing else is;
 * index[i] is list[i]'s index in the file. */
static brg_status match_file(const brg_model *m, const brg_safetensors *file, const state_entry *list, int n,
                             int *index)
{
    const char *path = brg_safetensors_path(file);
    const int nf = brg_safetensors_count(file);
    unsigned char *used = brg_calloc(nf > 0 ? (size_t)nf : 1, 1, "the tensors of a state file");
    if (!used) return BRG_ERR_HOST_MEMORY;
    brg_status st = BRG_OK;
    for (int i = 0; i < n && st == BRG_OK; i++) {
        const state_entry *e = &list[i];
        const int k = brg_safetensors_find(file, e->name);
        if (k < 0) {
            st = brg_error(BRG_ERR_FORMAT, "%s has no tensor '%s' (%s of layer '%s'): a file of another model%s?",
                           path, e->name, e->which < 0 ? "a parameter" : "optimizer state",
                           brg_model_get_layer(m, e->layer)->name, e->which < 0 ? "" : " or optimizer");
            break;
        }
        used[k] = 1;
        index[i] = k;
        brg_safetensor t;
        if (brg_safetensors_get(file, k, &t) != BRG_OK || t.dtype != BRG_F32) {
            st = brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' is %s; brigade's state is F32", path, e->name,
                           brg_safetensors_dtype_name(file, k));
            break;
        }
        int same = t.ndim == e->info.ndim;
        for (int d = 0; same && d < t.ndim; d++) same = t.shape[d] == e->info.shape[d];
        if (!same) {
            char got[96] = "", want[96] = "";
            size_t a = 0, b = 0;
            for (int d = 0; d < t.ndim && a < sizeof got; d++)
                a += (size_t)snprintf(got + a, sizeof got - a, "%s%lld", d ? "x" : "", (long long)t.shape[d]);
            for (int d = 0; d < e->info.ndim && b < sizeof want; d++)
                b += (size_t)snprintf(want + b, sizeof want - b, "%s%lld", d ? "x" : "", (long long)e->info.shape[d]);
            st = brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' has shape [%s]; the model's is [%s]", path, e->name,
                           t.ndim ? got : "scalar", want);
        }
    }
    for (int k = 0; k < nf && st == BRG_OK; k++) {
        if (used[k]) continue;
        brg_safetensor t;
        (void)brg_safetensors_get(file, k, &t);
        st = brg_error(BRG_ERR_FORMAT, "%s holds tensor '%s', which this model and optimizer do not have (%d of its "
                       "%d tensors are theirs)", path, t.name, n, nf);
    }
    free(used);
    return st;
}

brg_status brg_model_check_weights_file(const brg_model *m, const char *path)
{
    if (!m || !path)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_check_weights_file: model and path must be given");
    if (!brg_model_is_final(m))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is not finalized", brg_model_name(m));
    state_entry *list = NULL;
    int n = 0;
    BRG_CHECK(list_state(m, NULL, BRG_STATE_WEIGHTS, &list, &n));
    int *index = brg_calloc(n > 0 ? (size_t)n : 1, sizeof *index, "the tensors of a state file");
    brg_safetensors *file = NULL;
    brg_status st = index ? brg_safetensors_open_header(path, &file) : BRG_ERR_HOST_MEMORY;
    if (st == BRG_OK) st = match_file(m, file, list, n, index);
    brg_safetensors_close(file);
    free(index);
    free(list);
    return st;
}

/* A state file opened and matched against a pipeline, ready to copy in. */
typedef struct state_load {
    brg_safetensors *file;
    state_entry *list;
    int n;
    int *index; /* list[i] is tensor index[i] of the file */
} state_load;

static void state_load_free(state_load *ld)
{
    brg_safetensors_close(ld->file);
    free(ld->list);
    free(ld->index);
    memset(ld, 0, sizeof *ld);
}

brg_status brg_file_sum_check(const char *file, brg_file_sum got, brg_file_sum want)
{
    if (got.bytes != want.bytes)
        return brg_error(BRG_ERR_FORMAT, "%s has %" PRIu64 " bytes; its checkpoint's manifest says %" PRIu64
                         " (a damaged or half-written file)", file, got.bytes, want.bytes);
    if (got.crc32 != want.crc32)
        return brg_error(BRG_ERR_FORMAT, "%s: checksum %08" PRIx32 ", but its checkpoint's manifest says %08" PRIx32
                         " (a damaged file)", file, got.crc32, want.crc32);
    return BRG_OK;
}

/* brg_safetensors_check_fn: the file as read has the size and checksum
 * its manifest lists (ctx, a brg_file_sum). */
static brg_status check_sum(void *ctx, const char *path, const void *bytes, size_t size)
{
    const brg_file_sum got = {size, (uint32_t)crc32_z(crc32(0L, Z_NULL, 0), bytes, size)};
    return brg_file_sum_check(path, got, *(const brg_file_sum *)ctx);
}

/* Every value of the matched tensors is finite: a NaN or Inf in a
 * parameter, a running statistic or the optimizer's state (a file edited,
 * or saved from a run gone wrong) trained on as a loss "diverged" at the
 * first step, blaming --lr, or evaluated to a loss of nan with exit 0. */
static brg_status all_finite(const state_load *ld)
{
    for (int i = 0; i < ld->n; i++) {
        brg_safetensor t;
        BRG_CHECK(brg_safetensors_get(ld->file, ld->index[i], &t));
        const unsigned char *bytes = t.data; /* a file's data need not be aligned for float */
        for (size_t j = 0; j < (size_t)ld->list[i].info.count; j++) {
            float v;
            memcpy(&v, bytes + j * sizeof v, sizeof v);
            if (!isfinite(v))
                return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' holds %s at element %zu: not a state to load "
                                 "(a file edited, or saved from a run gone wrong)",
                                 brg_safetensors_path(ld->file), ld->list[i].name, isnan(v) ? "NaN" : "Inf", j);
        }
    }
    return BRG_OK;
}

/* Open path (checked against sum, when given) and check it holds exactly
 * the parts' tensors: no device is touched, so a failure here leaves the
 * pipeline as it was. */
static brg_status state_prepare(const brg_pipeline *pl, const char *path, unsigned parts, const brg_file_sum *sum,
                                state_load *ld)
{
    memset(ld, 0, sizeof *ld);
    const brg_pipeline_desc *desc = brg_pipeline_get_desc(pl);
    BRG_CHECK(list_state(desc->model, &desc->optimizer, parts, &ld->list, &ld->n));
    ld->index = brg_calloc(ld->n > 0 ? (size_t)ld->n : 1, sizeof *ld->index, "the tensors of a state file");
    brg_status st = !ld->index ? BRG_ERR_HOST_MEMORY
                               : brg_safetensors_open_checked(path, sum ? check_sum : NULL, (void *)sum, &ld->file);
    if (st == BRG_OK) st = match_file(desc->model, ld->file, ld->list, ld->n, ld->index);
    if (st == BRG_OK) st = all_finite(ld);
    if (st != BRG_OK) state_load_free(ld);
    return st;
}

static brg_status state_apply(brg_pipeline *pl, const state_load *ld)
{
    for (int i = 0; i < ld->n; i++) {
        const state_entry *e = &ld->list[i];
        brg_safetensor t;
        brg_status st = brg_safetensors_get(ld->file, ld->index[i], &t);
        if (st == BRG_OK)
            st = brg_pipeline_write_state(pl, e->layer, e->param, e->which, t.data, (size_t)e->info.count);
        if (st != BRG_OK) return brg_error_context(st, "loading '%s' from %s", e->name, brg_safetensors_path(ld->file));
    }
    return BRG_OK;
}

brg_status brg_state_load(brg_pipeline *pl, const char *path, unsigned parts, brg_status st, const brg_file_sum *sum)
{
    if (!pl || !path)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_load_state: pipeline and path must be given");
    BRG_CHECK(check_parts(parts, "brg_pipeline_load_state"));
    /* Every rank reads the file (a shared file system) and copies in its
     * own layers', once every rank has found it whole. */
    state_load ld;
    memset(&ld, 0, sizeof ld);
    if (st == BRG_OK) st = state_prepare(pl, path, parts, sum, &ld);
    st = brg_state_together(pl, st, "reading the state file");
    if (st != BRG_OK) {
        state_load_free(&ld); /* open here when only another rank failed */
        return st;
    }
    st = state_apply(pl, &ld);
    state_load_free(&ld);
    return brg_state_together(pl, st, "loading the state");
}

brg_status brg_state_load_pair(brg_pipeline *pl, const char *weights, const char *optimizer,
                               const brg_file_sum sums[2])
{
    state_load w, o;
    memset(&o, 0, sizeof o);
    brg_status st = state_prepare(pl, weights, BRG_STATE_WEIGHTS, &sums[0], &w);
    if (st == BRG_OK) st = state_prepare(pl, optimizer, BRG_STATE_OPTIMIZER, &sums[1], &o);
    st = brg_state_together(pl, st, "reading the state files");
    if (st != BRG_OK) { /* either may be open when only another rank failed */
        state_load_free(&w);
        state_load_free(&o);
        return st;
    }
    st = state_apply(pl, &w);
    if (st == BRG_OK) st = state_apply(pl, &o);
    state_load_free(&w);
    state_load_free(&o);
    return brg_state_together(pl, st, "loading the state");
}

/* Models: blocks of layers over named tensors, shape inference, block
 * boundaries, parameter counts and reproducible initialization. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/model.h"
#include "brigade/ops.h"
#include "base/rng.h"
#include "base/internal.h"
#include "model/layers/layer-kind.h"

typedef struct block {
    char name[BRG_NAME_MAX];
    int first, count; /* layers */
} block;

/* Open-addressing table from name to index; size is a power of two kept at
 * least twice the number of entries. */
typedef struct name_table {
    int *slots; /* index + 1, 0 = empty */
    size_t size;
} name_table;

struct brg_model {
    char name[BRG_NAME_MAX];
    block *blocks;
    int n_blocks, cap_blocks;
    brg_layer *layers;
    int n_layers, cap_layers;
    brg_model_tensor *tensors;
    int n_tensors, cap_tensors;
    name_table tensor_names, layer_names, block_names;
    int output;
    int final;
    int64_t trainable, frozen;
};

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

typedef const char *(*name_of_fn)(const brg_model *m, int index);
static const char *tensor_name_of(const brg_model *m, int i) { return m->tensors[i].name; }
static const char *layer_name_of(const brg_model *m, int i) { return m->layers[i].name; }
static const char *block_name_of(const brg_model *m, int i) { return m->blocks[i].name; }

static int table_find(const brg_model *m, const name_table *t, name_of_fn name_of, const char *name)
{
    if (!t->size) return -1;
    for (size_t i = hash_name(name) & (t->size - 1);; i = (i + 1) & (t->size - 1)) {
        int v = t->slots[i];
        if (v == 0) return -1;
        if (strcmp(name_of(m, v - 1), name) == 0) return v - 1;
    }
}

static int table_insert(const brg_model *m, name_table *t, name_of_fn name_of, int index, int n_entries)
{
    if ((size_t)(n_entries + 1) * 2 > t->size) {
        size_t size = t->size ? t->size * 2 : 64;
        int *slots = calloc(size, sizeof *slots);
        if (!slots) return 0;
        for (size_t i = 0; i < t->size; i++) {
            if (!t->slots[i]) continue;
            size_t j = hash_name(name_of(m, t->slots[i] - 1)) & (size - 1);
            while (slots[j]) j = (j + 1) & (size - 1);
            slots[j] = t->slots[i];
        }
        free(t->slots);
        t->slots = slots;
        t->size = size;
    }
    size_t j = hash_name(name_of(m, index)) & (t->size - 1);
    while (t->slots[j]) j = (j + 1) & (t->size - 1);
    t->slots[j] = index + 1;
    return 1;
}

/* Grow a dynamic array to hold one more element. */
static int reserve(void **items, int *cap, int n, size_t elem)
{
    if (n < *cap) return 1;
    int c = *cap ? *cap * 2 : 16;
    void *p = realloc(*items, (size_t)c * elem);
    if (!p) return 0;
    *items = p;
    *cap = c;
    return 1;
}

static brg_status check_name(const char *what, const char *name)
{
    if (!name || !name[0]) return brg_error(BRG_ERR_INVALID_ARGUMENT, "a %s needs a non-empty name", what);
    if (strlen(name) >= BRG_NAME_MAX)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s name '%.40s...' is longer than %d characters", what, name,
                         BRG_NAME_MAX - 1);
    return BRG_OK;
}

static brg_status add_tensor(brg_model *m, const char *name, int64_t c, int64_t h, int64_t w, int producer,
                             int blk)
{
    BRG_CHECK(check_name("tensor", name));
    if (table_find(m, &m->tensor_names, tensor_name_of, name) >= 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "tensor '%s' is written twice", name);
    if (!reserve((void **)&m->tensors, &m->cap_tensors, m->n_tensors, sizeof *m->tensors))
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot grow the tensor table");
    brg_model_tensor *t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->c = c;
    t->h = h;
    t->w = w;
    t->producer = producer;
    t->block = blk;
    t->last_use_block = -1;
    if (!table_insert(m, &m->tensor_names, tensor_name_of, m->n_tensors, m->n_tensors))
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot grow the tensor name table");
    m->n_tensors++;
    return BRG_OK;
}

brg_layer_desc brg_layer_desc_init(brg_layer_kind kind)
{
    const brg_layer_kind_info *k = brg_layer_kind_info_of(kind);
    brg_layer_desc d;
    if (k) {
        d = k->defaults;
    } else {
        memset(&d, 0, sizeof d);
        d.stride_h = d.stride_w = 1;
    }
    d.kind = kind;
    return d;
}

brg_status brg_model_create(const char *name, int64_t channels, int64_t height, int64_t width, brg_model **out)
{
    *out = NULL;
    BRG_CHECK(check_name("model", name));
    if (channels < 1 || height < 1 || width < 1 || channels > (1 << 24) || height > (1 << 20) || width > (1 << 20))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s': input %lldx%lldx%lld is not a valid CxHxW", name,
                         (long long)channels, (long long)height, (long long)width);
    brg_model *m = brg_calloc(1, sizeof *m, "a model");
    if (!m) return BRG_ERR_HOST_MEMORY;
    snprintf(m->name, sizeof m->name, "%s", name);
    m->output = -1;
    brg_status st = add_tensor(m, "input", channels, height, width, -1, -1);
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return st;
    }
    *out = m;
    return BRG_OK;
}

void brg_model_destroy(brg_model *m)
{
    if (!m) return;
    free(m->blocks);
    free(m->layers);
    free(m->tensors);
    free(m->tensor_names.slots);
    free(m->layer_names.slots);
    free(m->block_names.slots);
    free(m);
}

brg_status brg_model_begin_block(brg_model *m, const char *name)
{
    if (m->final) return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is finalized", m->name);
    BRG_CHECK(check_name("block", name));
    if (table_find(m, &m->block_names, block_name_of, name) >= 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' already has a block '%s'", m->name, name);
    if (m->n_blocks > 0 && m->blocks[m->n_blocks - 1].count == 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "block '%s' has no layers", m->blocks[m->n_blocks - 1].name);
    if (!reserve((void **)&m->blocks, &m->cap_blocks, m->n_blocks, sizeof *m->blocks))
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot grow the block table");
    block *b = &m->blocks[m->n_blocks];
    snprintf(b->name, sizeof b->name, "%s", name);
    b->first = m->n_layers;
    b->count = 0;
    if (!table_insert(m, &m->block_names, block_name_of, m->n_blocks, m->n_blocks))
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot grow the block name table");
    m->n_blocks++;
    return BRG_OK;
}

/* Check desc's parameters for its kind and compute the output shape from
 * the inputs (the kind's infer, after the count of inputs). Messages name
 * the layer. */
static brg_status infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in, int n_in,
                        int64_t *c, int64_t *h, int64_t *w)
{
    const brg_layer_kind_info *k = brg_layer_kind_info_of(d->kind);
    if (!k) return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s': unknown layer kind %d", name, (int)d->kind);
    if (k->min_inputs == k->max_inputs && n_in != k->min_inputs)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s' (%s) takes %d input%s, given %d", name, k->name,
                         k->min_inputs, k->min_inputs == 1 ? "" : "s", n_in);
    *c = in[0]->c;
    *h = in[0]->h;
    *w = in[0]->w;
    return k->infer(name, d, in, n_in, c, h, w);
}

/* The part of desc that matters for its kind (its fields), on top of the
 * kind's defaults, with flags as 0 or 1: two layers that behave the same
 * then compare equal, however their descriptions were filled in. */
static brg_layer_desc normalized(const brg_layer_desc *d)
{
    brg_layer_desc n = brg_layer_desc_init(d->kind);
    const brg_layer_kind_info *k = brg_layer_kind_info_of(d->kind);
    for (const brg_layer_field *f = k ? k->fields : NULL; f && f->key; f++) {
        const char *from = (const char *)d;
        char *to = (char *)&n;
        switch (f->type) {
        case BRG_FIELD_PAIR: memcpy(to + f->at2, from + f->at2, sizeof(int)); /* fall through */
        case BRG_FIELD_INT: memcpy(to + f->at, from + f->at, sizeof(int)); break;
        case BRG_FIELD_BOOL: *(int *)(void *)(to + f->at) = *(const int *)(const void *)(from + f->at) != 0; break;
        case BRG_FIELD_FLOAT: memcpy(to + f->at, from + f->at, sizeof(float)); break;
        }
    }
    return n;
}

static void count_params(brg_layer *l, const brg_model *m)
{
    l->trainable_params = l->frozen_params = 0;
    int n = brg_layer_param_count(l, m);
    for (int i = 0; i < n; i++) {
        brg_param_info p;
        if (brg_layer_param(l, m, i, &p) != BRG_OK) continue;
        if (p.trainable)
            l->trainable_params += p.count;
        else
            l->frozen_params += p.count;
    }
}

brg_status brg_model_add(brg_model *m, const char *name, const brg_layer_desc *desc, const char *const *inputs,
                         int n_inputs, const char *output)
{
    if (m->final) return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is finalized", m->name);
    BRG_CHECK(check_name("layer", name));
    if (m->n_blocks == 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s' comes before any block; call brg_model_begin_block",
                         name);
    if ((int)desc->kind < 0 || desc->kind >= BRG_LAYER_KIND_COUNT)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s': unknown layer kind %d", name, (int)desc->kind);
    if (table_find(m, &m->layer_names, layer_name_of, name) >= 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' already has a layer '%s'", m->name, name);
    if (n_inputs < 1 || n_inputs > BRG_LAYER_MAX_INPUTS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s' has %d inputs; 1 to %d are allowed", name, n_inputs,
                         BRG_LAYER_MAX_INPUTS);
    const brg_model_tensor *in[BRG_LAYER_MAX_INPUTS];
    int ids[BRG_LAYER_MAX_INPUTS];
    for (int i = 0; i < n_inputs; i++) {
        ids[i] = inputs[i] ? table_find(m, &m->tensor_names, tensor_name_of, inputs[i]) : -1;
        if (ids[i] < 0)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s' reads tensor '%s', which no earlier layer writes",
                             name, inputs[i] ? inputs[i] : "(null)");
        in[i] = &m->tensors[ids[i]];
    }
    int64_t c = 0, h = 0, w = 0;
    const brg_layer_desc norm = normalized(desc);
    BRG_CHECK(infer(name, &norm, in, n_inputs, &c, &h, &w));
    if ((double)c * (double)h * (double)w > BRG_LAYER_MAX_WEIGHTS)
        return brg_error(BRG_ERR_SHAPE, "layer '%s': output %lldx%lldx%lld has more than 2^40 elements per sample",
                         name, (long long)c, (long long)h, (long long)w);
    if (!reserve((void **)&m->layers, &m->cap_layers, m->n_layers, sizeof *m->layers))
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot grow the layer table");
    int blk = m->n_blocks - 1;
    BRG_CHECK(add_tensor(m, output ? output : name, c, h, w, m->n_layers, blk));
    brg_layer *l = &m->layers[m->n_layers];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->desc = norm;
    l->block = blk;
    l->n_inputs = n_inputs;
    for (int i = 0; i < n_inputs; i++) {
        l->inputs[i] = ids[i];
        m->tensors[ids[i]].last_use_block = blk;
    }
    l->output = m->n_tensors - 1;
    count_params(l, m);
    if (!table_insert(m, &m->layer_names, layer_name_of, m->n_layers, m->n_layers))
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot grow the layer name table");
    m->n_layers++;
    m->blocks[blk].count++;
    m->trainable += l->trainable_params;
    m->frozen += l->frozen_params;
    return BRG_OK;
}

brg_status brg_model_finalize(brg_model *m, const char *output)
{
    if (m->final) return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is already finalized", m->name);
    if (m->n_layers == 0) return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' has no layers", m->name);
    if (m->blocks[m->n_blocks - 1].count == 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "block '%s' has no layers", m->blocks[m->n_blocks - 1].name);
    int out = output ? table_find(m, &m->tensor_names, tensor_name_of, output) : m->layers[m->n_layers - 1].output;
    if (out < 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' has no tensor '%s' to be its output", m->name, output);
    if (out == 0) return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s': the output cannot be the input", m->name);
    for (int t = 0; t < m->n_tensors; t++) {
        if (t == out) continue;
        if (m->tensors[t].last_use_block < 0)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "model '%s': tensor '%s' is computed but never used (only the output '%s' may be unread)",
                             m->name, m->tensors[t].name, m->tensors[out].name);
    }
    if (m->tensors[out].last_use_block >= 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s': the output '%s' is read by another layer", m->name,
                         m->tensors[out].name);
    m->output = out;
    m->final = 1;
    return BRG_OK;
}

/* ---- reading ---- */

const char *brg_model_name(const brg_model *m) { return m->name; }
int brg_model_is_final(const brg_model *m) { return m->final; }
int brg_model_block_count(const brg_model *m) { return m->n_blocks; }

const char *brg_model_block_name(const brg_model *m, int b)
{
    return b >= 0 && b < m->n_blocks ? m->blocks[b].name : NULL;
}

void brg_model_block_layers(const brg_model *m, int b, int *first, int *count)
{
    *first = 0;
    *count = 0;
    if (b < 0 || b >= m->n_blocks) return;
    *first = m->blocks[b].first;
    *count = m->blocks[b].count;
}

int brg_model_find_block(const brg_model *m, const char *name)
{
    return name ? table_find(m, &m->block_names, block_name_of, name) : -1;
}

int brg_model_layer_count(const brg_model *m) { return m->n_layers; }

int brg_model_find_layer(const brg_model *m, const char *name)
{
    return name ? table_find(m, &m->layer_names, layer_name_of, name) : -1;
}
const brg_layer *brg_model_get_layer(const brg_model *m, int i)
{
    return i >= 0 && i < m->n_layers ? &m->layers[i] : NULL;
}
int brg_model_tensor_count(const brg_model *m) { return m->n_tensors; }

const brg_model_tensor *brg_model_get_tensor(const brg_model *m, int i)
{
    return i >= 0 && i < m->n_tensors ? &m->tensors[i] : NULL;
}

int brg_model_find_tensor(const brg_model *m, const char *name)
{
    return name ? table_find(m, &m->tensor_names, tensor_name_of, name) : -1;
}

int brg_model_input(const brg_model *m)
{
    (void)m;
    return 0;
}

int brg_model_output(const brg_model *m) { return m->output; }
int64_t brg_model_classes(const brg_model *m) { return m->output >= 0 ? m->tensors[m->output].c : 0; }
int64_t brg_model_label_count(const brg_model *m)
{
    return m->output >= 0 ? m->tensors[m->output].h * m->tensors[m->output].w : 0;
}

brg_status brg_model_boundary_tensors(const brg_model *m, int boundary, int *ids, int max, int *count)
{
    *count = 0;
    if (!m->final) return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is not finalized", m->name);
    if (boundary < 0 || boundary >= m->n_blocks - 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' has boundaries 0..%d, not %d", m->name,
                         m->n_blocks - 2, boundary);
    int n = 0;
    for (int t = 0; t < m->n_tensors; t++) {
        const brg_model_tensor *x = &m->tensors[t];
        if (x->block <= boundary && x->last_use_block > boundary) {
            if (n < max) ids[n] = t;
            n++;
        }
    }
    *count = n;
    if (n > max)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "boundary %d of model '%s' is crossed by %d tensors, more than %d",
                         boundary, m->name, n, max);
    return BRG_OK;
}

int64_t brg_model_trainable_params(const brg_model *m) { return m->trainable; }
int64_t brg_model_frozen_params(const brg_model *m) { return m->frozen; }

/* ---- parameters ---- */

static const char *const param_names[] = {"weight", "bias", "gamma", "beta", "running_mean", "running_var"};

int brg_layer_param_count(const brg_layer *l, const brg_model *m)
{
    (void)m;
    brg_param_kind kinds[BRG_LAYER_MAX_PARAMS];
    return brg_layer_param_kinds(l, kinds);
}

brg_status brg_layer_param(const brg_layer *l, const brg_model *m, int index, brg_param_info *p)
{
    brg_param_kind kinds[BRG_LAYER_MAX_PARAMS];
    int n = brg_layer_param_kinds(l, kinds);
    if (index < 0 || index >= n)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s' has %d parameters, not %d", l->name, n, index + 1);
    const brg_model_tensor *x = &m->tensors[l->inputs[0]];
    const brg_model_tensor *y = &m->tensors[l->output];
    memset(p, 0, sizeof *p);
    p->name = param_names[kinds[index]];
    p->trainable = kinds[index] != BRG_P_RMEAN && kinds[index] != BRG_P_RVAR;
    if (kinds[index] == BRG_P_WEIGHT && brg_layer_kind_info_of(l->desc.kind)->filter_weight) {
        p->ndim = 4;
        p->shape[0] = y->c;
        p->shape[1] = x->c;
        p->shape[2] = l->desc.kernel_h;
        p->shape[3] = l->desc.kernel_w;
    } else if (kinds[index] == BRG_P_WEIGHT) {
        p->ndim = 2;
        p->shape[0] = y->c;
        p->shape[1] = x->c * x->h * x->w;
    } else {
        p->ndim = 1;
        p->shape[0] = y->c;
    }
    p->count = 1;
    for (int d = 0; d < p->ndim; d++) p->count *= p->shape[d];
    return BRG_OK;
}

/* A uniform double in [0, 1) from a counter-based stream: value i of the
 * stream `key` is a pure function of both, like the dropout mask. */
static double stream_uniform(uint64_t key, uint64_t i)
{
    return (double)(brg_splitmix64(key ^ brg_splitmix64(i)) >> 11) * (1.0 / 9007199254740992.0);
}

brg_status brg_layer_init_param(const brg_layer *l, const brg_model *m, int index, uint64_t seed, float *values)
{
    brg_param_info p;
    BRG_CHECK(brg_layer_param(l, m, index, &p));
    /* The stream depends on the seed, the layer's name and the parameter's
     * name only, so any partition of the model initializes it the same. */
    uint64_t key = brg_splitmix64(seed ^ hash_name(l->name)) ^ hash_name(p.name);
    const double two_pi = 6.283185307179586;
    if (strcmp(p.name, "weight") == 0 && brg_layer_kind_info_of(l->desc.kind)->filter_weight) {
        double fan_in = (double)(p.shape[1] * p.shape[2] * p.shape[3]);
        double std = sqrt(2.0 / fan_in); /* He normal */
        for (int64_t i = 0; i < p.count; i++) {
            double u1 = stream_uniform(key, 2 * (uint64_t)i), u2 = stream_uniform(key, 2 * (uint64_t)i + 1);
            if (u1 < 1e-300) u1 = 1e-300;
            values[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(two_pi * u2));
        }
    } else if (strcmp(p.name, "weight") == 0) {
        double limit = sqrt(6.0 / (double)(p.shape[0] + p.shape[1])); /* Glorot uniform */
        for (int64_t i = 0; i < p.count; i++)
            values[i] = (float)(limit * (2.0 * stream_uniform(key, (uint64_t)i) - 1.0));
    } else {
        float v = (strcmp(p.name, "gamma") == 0 || strcmp(p.name, "running_var") == 0) ? 1.0f : 0.0f;
        for (int64_t i = 0; i < p.count; i++) values[i] = v;
    }
    return BRG_OK;
}

/* ---- names and comparison ---- */

const char *brg_layer_kind_name(brg_layer_kind kind)
{
    const brg_layer_kind_info *k = brg_layer_kind_info_of(kind);
    return k ? k->name : "unknown";
}

brg_status brg_layer_kind_parse(const char *name, brg_layer_kind *kind)
{
    for (int k = 0; k < BRG_LAYER_KIND_COUNT; k++)
        if (name && strcmp(name, brg_layer_kind_info_of((brg_layer_kind)k)->name) == 0) {
            *kind = (brg_layer_kind)k;
            return BRG_OK;
        }
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown layer kind '%.100s'", name ? name : "(null)");
}

#define DIFF(...)                                                                                  \
    do {                                                                                           \
        if (why) snprintf(why, why_size, __VA_ARGS__);                                             \
        return 0;                                                                                  \
    } while (0)

static int int_at(const brg_layer_desc *d, size_t at) { return *(const int *)(const void *)((const char *)d + at); }
static float float_at(const brg_layer_desc *d, size_t at)
{
    return *(const float *)(const void *)((const char *)d + at);
}

/* Layers keep normalized descriptions (everything outside their kind's
 * fields at its defaults), so the kind and its fields say it all. */
static int desc_equal(const brg_layer_desc *a, const brg_layer_desc *b)
{
    const brg_layer_kind_info *k = brg_layer_kind_info_of(a->kind);
    if (a->kind != b->kind || !k) return a->kind == b->kind;
    for (const brg_layer_field *f = k->fields; f->key; f++) {
        switch (f->type) {
        case BRG_FIELD_PAIR:
            if (int_at(a, f->at2) != int_at(b, f->at2)) return 0;
            /* fall through */
        case BRG_FIELD_INT:
        case BRG_FIELD_BOOL:
            if (int_at(a, f->at) != int_at(b, f->at)) return 0;
            break;
        case BRG_FIELD_FLOAT:
            if (float_at(a, f->at) != float_at(b, f->at)) return 0;
            break;
        }
    }
    return 1;
}

int brg_model_equal(const brg_model *a, const brg_model *b, char *why, size_t why_size)
{
    if (strcmp(a->name, b->name) != 0) DIFF("names differ: '%s' and '%s'", a->name, b->name);
    if (a->n_blocks != b->n_blocks) DIFF("%d blocks and %d blocks", a->n_blocks, b->n_blocks);
    for (int i = 0; i < a->n_blocks; i++)
        if (strcmp(a->blocks[i].name, b->blocks[i].name) != 0 || a->blocks[i].count != b->blocks[i].count)
            DIFF("block %d: '%s' (%d layers) and '%s' (%d layers)", i, a->blocks[i].name, a->blocks[i].count,
                 b->blocks[i].name, b->blocks[i].count);
    if (a->n_tensors != b->n_tensors) DIFF("%d tensors and %d tensors", a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) {
        const brg_model_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->name, y->name) != 0 || x->c != y->c || x->h != y->h || x->w != y->w)
            DIFF("tensor %d: '%s' %lldx%lldx%lld and '%s' %lldx%lldx%lld", i, x->name, (long long)x->c,
                 (long long)x->h, (long long)x->w, y->name, (long long)y->c, (long long)y->h, (long long)y->w);
    }
    for (int i = 0; i < a->n_layers; i++) {
        const brg_layer *x = &a->layers[i], *y = &b->layers[i];
        if (strcmp(x->name, y->name) != 0) DIFF("layer %d: '%s' and '%s'", i, x->name, y->name);
        if (!desc_equal(&x->desc, &y->desc)) DIFF("layer '%s': parameters differ", x->name);
        if (x->n_inputs != y->n_inputs || x->output != y->output)
            DIFF("layer '%s': inputs or output differ", x->name);
        for (int k = 0; k < x->n_inputs; k++)
            if (x->inputs[k] != y->inputs[k]) DIFF("layer '%s': input %d differs", x->name, k);
    }
    if (a->output != b->output) DIFF("outputs differ");
    if (a->trainable != b->trainable || a->frozen != b->frozen) DIFF("parameter counts differ");
    return 1;
}

/* Per-layer profiles: measured forward and backward times that replace the
 * cost model's FLOP-based times (docs/planning.md, "Measured times").
 *
 * The profile is checked against the model as a whole when loaded, so a
 * plan either uses a measured time for every layer or fails: a layer left
 * out, a name the model does not have, a negative or non-finite time, a
 * wrong format or version are errors naming the file and the layer or
 * field. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan-impl.h"
#include "model/stash-rule.h"

#define PROFILE_FORMAT "brigade-profile"
#define PROFILE_VERSION 1

brg_profile *brg_profile_new(int n_layers, int micro_batch)
{
    brg_profile *p = brg_calloc(1, sizeof *p, "a profile");
    if (!p) return NULL;
    const size_t cells = n_layers > 0 ? (size_t)n_layers : 1;
    p->n_layers = n_layers;
    p->micro_batch = micro_batch;
    p->fwd = brg_calloc(cells, sizeof(double), "a profile");
    p->bwd_in = brg_calloc(cells, sizeof(double), "a profile");
    p->bwd_w = brg_calloc(cells, sizeof(double), "a profile");
    if (p->fwd && p->bwd_in && p->bwd_w) return p;
    brg_profile_destroy(p);
    return NULL;
}

brg_profile *brg_profile_copy(const brg_profile *src)
{
    brg_profile *p = brg_profile_new(src->n_layers, src->micro_batch);
    if (!p) return NULL;
    const size_t bytes = (size_t)src->n_layers * sizeof(double);
    memcpy(p->fwd, src->fwd, bytes);
    memcpy(p->bwd_in, src->bwd_in, bytes);
    memcpy(p->bwd_w, src->bwd_w, bytes);
    return p;
}

void brg_profile_destroy(brg_profile *p)
{
    if (!p) return;
    free(p->fwd);
    free(p->bwd_in);
    free(p->bwd_w);
    free(p);
}

/* A time field of layer entry e in milliseconds, as seconds. Missing:
 * *s = 0 when optional, else an error. */
static brg_status read_ms(const char *path, const char *layer, json_t *e, const char *key, int optional, double *s)
{
    json_t *v = json_object_get(e, key);
    *s = 0.0;
    if (!v) {
        if (optional) return BRG_OK;
        return brg_error(BRG_ERR_FORMAT, "profile '%s': layer '%s' has no \"%s\"", path, layer, key);
    }
    if (!json_is_number(v))
        return brg_error(BRG_ERR_FORMAT, "profile '%s': layer '%s': \"%s\" must be a number of milliseconds", path,
                         layer, key);
    double ms = json_number_value(v);
    /* 10^9 ms (11 days) for one layer's micro-batch: a larger "time" is not
     * one, and summed over a step it overflowed to inf, which the plan then
     * blamed on memory ("nothing fits"). */
    if (!isfinite(ms) || ms < 0.0 || ms > 1e9)
        return brg_error(BRG_ERR_FORMAT, "profile '%s': layer '%s': \"%s\" is %g; times must be finite, >= 0 and at "
                         "most 1e9 ms", path, layer, key, ms);
    *s = ms / 1000.0;
    return BRG_OK;
}

static brg_status check_layers(const brg_model *m, const char *path, json_t *layers, brg_profile *p)
{
    static const char *const known[] = {"forward_ms", "backward_input_ms", "backward_weight_ms"};
    for (int l = 0; l < p->n_layers; l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        json_t *e = json_object_get(layers, ly->name);
        if (!e)
            return brg_error(BRG_ERR_FORMAT, "profile '%s' has no times for layer '%s' of model '%s'", path, ly->name,
                             brg_model_name(m));
        if (!json_is_object(e))
            return brg_error(BRG_ERR_FORMAT, "profile '%s': layer '%s' must be an object of times", path, ly->name);
        const char *key;
        json_t *v;
        json_object_foreach(e, key, v)
        {
            int ok = 0;
            for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) ok |= strcmp(key, known[k]) == 0;
            if (!ok)
                return brg_error(BRG_ERR_FORMAT,
                                 "profile '%s': layer '%s' has an unknown field \"%s\" (expected forward_ms, "
                                 "backward_input_ms and backward_weight_ms)",
                                 path, ly->name, key);
        }
        BRG_CHECK(read_ms(path, ly->name, e, "forward_ms", 0, &p->fwd[l]));
        BRG_CHECK(read_ms(path, ly->name, e, "backward_input_ms", 0, &p->bwd_in[l]));
        /* Required where the split backward has a weight part (conv2d, linear). */
        BRG_CHECK(read_ms(path, ly->name, e, "backward_weight_ms", !brg_backward_has_weight_part(ly->desc.kind),
                          &p->bwd_w[l]));
    }
    if (json_object_size(layers) != (size_t)p->n_layers) {
        const char *key;
        json_t *v;
        json_object_foreach(layers, key, v)
        {
            if (brg_model_find_layer(m, key) < 0)
                return brg_error(BRG_ERR_FORMAT, "profile '%s' names layer '%s', which model '%s' does not have", path,
                                 key, brg_model_name(m));
        }
    }
    return BRG_OK;
}

static brg_status check_profile(const brg_model *m, const char *path, json_t *root, brg_profile *p)
{
    if (!json_is_object(root)) return brg_error(BRG_ERR_FORMAT, "profile '%s' is not a JSON object", path);
    json_t *v = json_object_get(root, "format");
    if (!json_is_string(v) || strcmp(json_string_value(v), PROFILE_FORMAT) != 0)
        return brg_error(BRG_ERR_FORMAT, "profile '%s': \"format\" must be \"%s\"", path, PROFILE_FORMAT);
    v = json_object_get(root, "version");
    if (!json_is_integer(v) || json_integer_value(v) != PROFILE_VERSION)
        return brg_error(BRG_ERR_FORMAT, "profile '%s': \"version\" must be %d (this brigade reads version %d)", path,
                         PROFILE_VERSION, PROFILE_VERSION);
    v = json_object_get(root, "micro_batch");
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
        return brg_error(BRG_ERR_FORMAT,
                         "profile '%s': \"micro_batch\" must be a whole number >= 1 (the samples the times are for)",
                         path);
    p->micro_batch = (int)json_integer_value(v);
    v = json_object_get(root, "device");
    if (v && !json_is_string(v))
        return brg_error(BRG_ERR_FORMAT, "profile '%s': \"device\" must be a string", path);
    json_t *layers = json_object_get(root, "layers");
    if (!json_is_object(layers))
        return brg_error(BRG_ERR_FORMAT, "profile '%s': \"layers\" must be an object of per-layer times", path);
    return check_layers(m, path, layers, p);
}

brg_status brg_profile_load(const brg_model *model, const char *path, brg_profile **out)
{
    *out = NULL;
    if (!path) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_profile_load: path is NULL");
    FILE *f;
    BRG_CHECK(brg_open_regular(path, "profile", &f));
    json_error_t jerr;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    const int read_failed = ferror(f);
    fclose(f);
    if (read_failed) {
        json_decref(root);
        return brg_error(BRG_ERR_IO, "cannot read profile '%s'", path);
    }
    if (!root)
        return brg_error(BRG_ERR_FORMAT, "profile '%s' is not valid JSON: line %d, column %d: %s", path, jerr.line,
                         jerr.column, jerr.text);
    brg_profile *p = brg_profile_new(brg_model_layer_count(model), 0);
    brg_status ret = p ? check_profile(model, path, root, p) : BRG_ERR_HOST_MEMORY;
    json_decref(root);
    if (ret != BRG_OK) {
        brg_profile_destroy(p);
        return ret;
    }
    *out = p;
    return BRG_OK;
}

void brg_profile_apply(const brg_profile *p, brg_cost *c, double device_flops)
{
    const double scale = (double)c->micro_batch / (double)p->micro_batch * device_flops;
    for (int b = 0; b < c->n_blocks; b++) {
        brg_cost_block *cb = &c->blocks[b];
        cb->fwd_flops = cb->bwd_in_flops = cb->bwd_w_flops = 0.0; /* the loss too: not a layer */
    }
    for (int l = 0; l < p->n_layers; l++) {
        brg_cost_block *cb = &c->blocks[brg_model_get_layer(c->model, l)->block];
        cb->fwd_flops += p->fwd[l] * scale;
        cb->bwd_in_flops += p->bwd_in[l] * scale;
        cb->bwd_w_flops += p->bwd_w[l] * scale;
    }
}

/* Milliseconds rounded to nanoseconds: the file stays readable. */
static json_t *ms_value(double seconds) { return json_real(round(seconds * 1e9) / 1e6); }

brg_status brg_profile_save(const brg_model *model, const brg_profile *p, const char *device, const char *path)
{
    if (!model || !p || !path)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_profile_save: model, profile and path must be given");
    if (p->n_layers != brg_model_layer_count(model))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_profile_save: the profile has %d layers, model '%s' %d",
                         p->n_layers, brg_model_name(model), brg_model_layer_count(model));
    json_t *root = json_object(), *layers = json_object();
    int bad = !root || !layers;
    bad = bad || json_object_set_new(root, "format", json_string(PROFILE_FORMAT));
    bad = bad || json_object_set_new(root, "version", json_integer(PROFILE_VERSION));
    bad = bad || json_object_set_new(root, "model", json_string(brg_model_name(model)));
    bad = bad || json_object_set_new(root, "micro_batch", json_integer(p->micro_batch));
    if (device) bad = bad || json_object_set_new(root, "device", json_string(device));
    for (int l = 0; !bad && l < p->n_layers; l++) {
        const brg_layer *ly = brg_model_get_layer(model, l);
        json_t *e = json_object();
        bad = !e || json_object_set_new(layers, ly->name, e);
        bad = bad || json_object_set_new(e, "forward_ms", ms_value(p->fwd[l]));
        bad = bad || json_object_set_new(e, "backward_input_ms", ms_value(p->bwd_in[l]));
        if (!bad && (brg_backward_has_weight_part(ly->desc.kind) || p->bwd_w[l] > 0.0))
            bad = json_object_set_new(e, "backward_weight_ms", ms_value(p->bwd_w[l]));
    }
    if (!bad) bad = json_object_set(root, "layers", layers);
    json_decref(layers);
    if (bad) {
        json_decref(root);
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot build the JSON of profile '%s'", path);
    }
    const size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER;
    const int to_stdout = strcmp(path, "-") == 0;
    const int failed = to_stdout ? json_dumpf(root, stdout, flags) != 0 || fputc('\n', stdout) == EOF ||
                                       fflush(stdout) != 0
                                 : json_dump_file(root, path, flags) != 0;
    json_decref(root);
    if (failed)
        return brg_error(BRG_ERR_IO, "cannot write profile '%s': %s", to_stdout ? "(standard output)" : path,
                         strerror(errno));
    return BRG_OK;
}

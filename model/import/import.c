/* The import object: the flat layer list an importer builds, the
 * parameters with the file's values, the notes, and the final model. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model/cuts.h"
#include "model/import/import-impl.h"

/* Grow *array (of *cap elements of size each) to hold one more than n. */
static int grow(void **array, int *cap, int n, size_t size, const char *what)
{
    if (n < *cap) return 1;
    const int want = *cap ? *cap * 2 : 32;
    void *p = realloc(*array, (size_t)want * size);
    if (!p) {
        brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate %s", what);
        return 0;
    }
    *array = p;
    *cap = want;
    return 1;
}

brg_status import_begin(const char *name, int64_t c, int64_t h, int64_t w, brg_import **out)
{
    *out = NULL;
    /* brg_model_create's limits, said as what the file holds (it would call
     * them an invalid argument, a mistake in the command line). */
    if (c > (1 << 24) || h > (1 << 20) || w > (1 << 20))
        return brg_error(BRG_ERR_UNSUPPORTED, "the input is %lldx%lldx%lld (CxHxW): brigade's inputs have at most "
                         "%d channels and %d rows and columns", (long long)c, (long long)h, (long long)w, 1 << 24,
                         1 << 20);
    brg_import *imp = brg_calloc(1, sizeof *imp, "an import");
    if (!imp) return BRG_ERR_HOST_MEMORY;
    snprintf(imp->name, sizeof imp->name, "%s", name);
    brg_status st = brg_model_create(imp->name, c, h, w, &imp->probe);
    if (st == BRG_OK) st = brg_model_begin_block(imp->probe, "all");
    if (st != BRG_OK) {
        brg_import_free(imp);
        return st;
    }
    *out = imp;
    return BRG_OK;
}

void import_note(brg_import *imp, const char *fmt, ...)
{
    if (!grow((void **)&imp->notes, &imp->cap_notes, imp->n_notes, sizeof *imp->notes, "a note")) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!text) return; /* a note is worth less than the import */
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    imp->notes[imp->n_notes++] = text;
}

brg_status import_reserve_name(brg_import *imp, const char *name)
{
    if (!grow((void **)&imp->reserved, &imp->cap_reserved, imp->n_reserved, sizeof *imp->reserved, "the layer names"))
        return BRG_ERR_HOST_MEMORY;
    snprintf(imp->reserved[imp->n_reserved++], BRG_NAME_MAX, "%s", name);
    return BRG_OK;
}

static int name_taken(const brg_import *imp, const char *name)
{
    if (brg_model_find_tensor(imp->probe, name) >= 0) return 1;
    for (int i = 0; i < imp->n_reserved; i++)
        if (strcmp(imp->reserved[i], name) == 0) return 1;
    return 0;
}

void import_unique_name(const brg_import *imp, const char *base, char *out)
{
    snprintf(out, BRG_NAME_MAX, "%s", base);
    for (int k = 2; name_taken(imp, out); k++) {
        char suffix[16];
        const int ns = snprintf(suffix, sizeof suffix, "_%d", k);
        const int keep = (int)strlen(base) < BRG_NAME_MAX - 1 - ns ? (int)strlen(base) : BRG_NAME_MAX - 1 - ns;
        snprintf(out, BRG_NAME_MAX, "%.*s%s", keep, base, suffix);
    }
}

/* The builder's BRG_ERR_INVALID_ARGUMENT for a layer made from the file is
 * the file's fault (BRG_ERR_FORMAT), not the caller's: callers tell a wrong
 * argument (the wrong file given) from a bad file by it. */
static brg_status file_status(brg_status st) { return st == BRG_ERR_INVALID_ARGUMENT ? BRG_ERR_FORMAT : st; }

brg_status import_add_layer(brg_import *imp, const char *name, const brg_layer_desc *desc,
                            const char *const *inputs, int n_inputs, int *index)
{
    if (n_inputs > BRG_LAYER_MAX_INPUTS)
        return brg_error(BRG_ERR_UNSUPPORTED, "%d inputs; a brigade layer reads at most %d", n_inputs,
                         BRG_LAYER_MAX_INPUTS);
    if (!grow((void **)&imp->layers, &imp->cap_layers, imp->n_layers, sizeof *imp->layers, "the layer list"))
        return BRG_ERR_HOST_MEMORY;
    BRG_CHECK(file_status(brg_model_add(imp->probe, name, desc, inputs, n_inputs, NULL)));
    import_layer *l = &imp->layers[imp->n_layers];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->desc = *desc;
    l->n_inputs = n_inputs;
    for (int i = 0; i < n_inputs; i++) snprintf(l->inputs[i], sizeof l->inputs[i], "%s", inputs[i]);
    if (index) *index = imp->n_layers;
    imp->n_layers++;
    return BRG_OK;
}

import_shape import_tensor(const brg_import *imp, const char *name)
{
    const brg_model_tensor *t = brg_model_get_tensor(imp->probe, brg_model_find_tensor(imp->probe, name));
    import_shape s = {0, 0, 0};
    if (t) s.c = t->c, s.h = t->h, s.w = t->w;
    return s;
}

/* values (the file's layout) into dst (brigade's). */
static void rearrange(const import_param *p, const float *values, float *dst)
{
    const int64_t *d = p->dims;
    switch (p->layout) {
    case IMPORT_AS_IS: memcpy(dst, values, (size_t)p->count * sizeof *dst); return;
    case IMPORT_TRANSPOSE:
        for (int64_t r = 0; r < d[0]; r++)
            for (int64_t c = 0; c < d[1]; c++) dst[c * d[0] + r] = values[r * d[1] + c];
        return;
    case IMPORT_HWIO: /* [kh, kw, in, out] -> [out, in, kh, kw] */
        for (int64_t y = 0; y < d[0]; y++)
            for (int64_t x = 0; x < d[1]; x++)
                for (int64_t i = 0; i < d[2]; i++)
                    for (int64_t o = 0; o < d[3]; o++)
                        dst[((o * d[2] + i) * d[0] + y) * d[1] + x] = values[((y * d[1] + x) * d[2] + i) * d[3] + o];
        return;
    case IMPORT_HWC_ROWS: /* [(h, w, c), out] -> [out, (c, h, w)] */
        for (int64_t y = 0; y < d[0]; y++)
            for (int64_t x = 0; x < d[1]; x++)
                for (int64_t c = 0; c < d[2]; c++)
                    for (int64_t o = 0; o < d[3]; o++)
                        dst[o * d[0] * d[1] * d[2] + (c * d[0] + y) * d[1] + x] =
                            values[((y * d[1] + x) * d[2] + c) * d[3] + o];
        return;
    }
}

/* A NaN or infinity among a file's weights is a broken export (or a
 * double too large for float32): training from it diverges at the first
 * step with no hint why, so the import refuses it, naming the weight. */
static brg_status set_values(import_param *p, const float *values)
{
    for (int64_t k = 0; k < p->count; k++)
        if (!isfinite(values[k]))
            return brg_error(BRG_ERR_FORMAT, "weight '%s' holds %s (value %lld of %lld): brigade trains from finite "
                             "weights; export the model again", p->source, isnan(values[k]) ? "NaN" : "an infinity",
                             (long long)k, (long long)p->count);
    float *v = brg_malloc((size_t)(p->count ? p->count : 1) * sizeof *v, "an imported weight");
    if (!v) return BRG_ERR_HOST_MEMORY;
    rearrange(p, values, v);
    free(p->values);
    p->values = v;
    return BRG_OK;
}

/* Whether the file's dims, read through the layout, are the parameter's
 * shape: what makes rearrange() stay inside both arrays. */
static int layout_fits(import_layout layout, const int64_t *d, const brg_param_info *info)
{
    const int64_t *s = info->shape;
    for (int i = 0; layout != IMPORT_AS_IS && i < 4; i++)
        if (d[i] < 0 || d[i] > ((int64_t)1 << 40)) return 0;
    switch (layout) {
    case IMPORT_AS_IS: return 1;
    case IMPORT_TRANSPOSE: return info->ndim == 2 && d[0] == s[1] && d[1] == s[0];
    case IMPORT_HWIO: return info->ndim == 4 && d[3] == s[0] && d[2] == s[1] && d[0] == s[2] && d[1] == s[3];
    case IMPORT_HWC_ROWS:
        return info->ndim == 2 && d[3] == s[0] && d[0] > 0 && d[1] > 0 && d[2] > 0 && d[0] <= s[1] &&
               d[1] <= s[1] / d[0] && d[2] <= s[1] / (d[0] * d[1]) && d[0] * d[1] * d[2] == s[1];
    }
    return 0;
}

brg_status import_add_param(brg_import *imp, int layer, const char *param, const char *source,
                            import_layout layout, const int64_t dims[4], const float *values, int64_t count)
{
    const brg_layer *l = brg_model_get_layer(imp->probe, layer);
    brg_param_info info;
    int index = -1;
    for (int i = 0; l && i < brg_layer_param_count(l, imp->probe); i++)
        if (brg_layer_param(l, imp->probe, i, &info) == BRG_OK && strcmp(info.name, param) == 0) index = i;
    if (index < 0) return brg_error(BRG_ERR_INTERNAL, "layer %d has no parameter '%s'", layer, param);
    brg_layer_param(l, imp->probe, index, &info);
    if (count != info.count)
        return brg_error(BRG_ERR_SHAPE, "'%s' has %lld values; %s of layer '%s' needs %lld", source, (long long)count,
                         param, l->name, (long long)info.count);
    const int64_t none[4] = {0, 0, 0, 0};
    if (!layout_fits(layout, dims ? dims : none, &info))
        return brg_error(BRG_ERR_SHAPE, "'%s' does not have the shape %s of layer '%s' needs", source, param, l->name);
    /* One weight read by two layers (a module applied twice) becomes two
     * parameters of the same values, which training moves apart. */
    int uses = 0, first = -1;
    for (int i = 0; i < imp->n_params; i++)
        if (strcmp(imp->params[i].source, source) == 0 && uses++ == 0) first = i;
    if (uses == 1)
        import_note(imp, "weight '%s' is shared by layers '%s' and '%s': brigade gives each its own copy, which "
                         "training will make differ", source,
                    brg_model_get_layer(imp->probe, imp->params[first].layer)->name, l->name);
    if (!grow((void **)&imp->params, &imp->cap_params, imp->n_params, sizeof *imp->params, "the parameter list"))
        return BRG_ERR_HOST_MEMORY;
    import_param *p = &imp->params[imp->n_params];
    memset(p, 0, sizeof *p);
    p->layer = layer;
    p->param = index;
    p->layout = layout;
    if (dims) memcpy(p->dims, dims, sizeof p->dims);
    p->count = count;
    p->source = strdup(source);
    if (!p->source) return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate a weight's name");
    imp->n_params++; /* freed with the import from here on */
    return values ? set_values(p, values) : BRG_OK;
}

const char *import_remedy_for(const import_remedy *table, size_t n, const char *name)
{
    const size_t len = strlen(name);
    for (size_t i = 0; i < n && len > 0; i++) /* an empty name would match everywhere, and never move on */
        for (const char *at = table[i].names; (at = strstr(at, name)) != NULL; at += len)
            if ((at == table[i].names || at[-1] == ',') && (at[len] == ',' || at[len] == '\0'))
                return table[i].advice;
    return "build the model from the ones below (docs/import.md says what each becomes) and export it again";
}

brg_status import_finish(brg_import *imp, const char *output)
{
    if (imp->n_layers == 0)
        return brg_error(BRG_ERR_UNSUPPORTED, "the graph has no layer brigade trains (its output is its input, "
                                              "or made from constants only)");
    const int n = imp->n_layers;
    unsigned char *cut = brg_calloc((size_t)n, 1, "the cut points");
    if (!cut) return BRG_ERR_HOST_MEMORY;
    brg_status st = brg_model_cut_points(imp->probe, 0, n, cut);
    const import_shape input = import_tensor(imp, "input");
    brg_model *m = NULL;
    if (st == BRG_OK) st = brg_model_create(imp->name, input.c, input.h, input.w, &m);
    for (int first = 0, end; first < n && st == BRG_OK; first = end) {
        for (end = first + 1; end < n && !cut[end - 1];) end++;
        char base[BRG_NAME_MAX], name[BRG_NAME_MAX];
        brg_model_range_name(imp->probe, first, end - first, base);
        brg_model_unique_block_name(m, NULL, -1, base, name);
        st = brg_model_begin_block(m, name);
        for (int i = first; i < end && st == BRG_OK; i++) {
            const import_layer *l = &imp->layers[i];
            const char *inputs[BRG_LAYER_MAX_INPUTS];
            for (int k = 0; k < l->n_inputs; k++) inputs[k] = l->inputs[k];
            st = brg_model_add(m, l->name, &l->desc, inputs, l->n_inputs, NULL);
        }
    }
    free(cut);
    if (st == BRG_OK) st = brg_model_finalize(m, output);
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return brg_error_context(file_status(st), "building the imported model");
    }
    imp->model = m;
    brg_model_destroy(imp->probe);
    imp->probe = NULL;
    return BRG_OK;
}

/* ---- the public object ---- */

void brg_import_free(brg_import *imp)
{
    if (!imp) return;
    brg_model_destroy(imp->probe);
    brg_model_destroy(imp->model);
    for (int i = 0; i < imp->n_params; i++) {
        free(imp->params[i].source);
        free(imp->params[i].values);
    }
    for (int i = 0; i < imp->n_notes; i++) free(imp->notes[i]);
    free(imp->params);
    free(imp->notes);
    free(imp->reserved);
    free(imp->layers);
    free(imp);
}

const brg_model *brg_import_model(const brg_import *imp) { return imp ? imp->model : NULL; }

brg_model *brg_import_take_model(brg_import *imp)
{
    if (!imp) return NULL;
    brg_model *m = imp->model;
    imp->model = NULL;
    return m;
}

int brg_import_note_count(const brg_import *imp) { return imp ? imp->n_notes : 0; }

const char *brg_import_note(const brg_import *imp, int index)
{
    return imp && index >= 0 && index < imp->n_notes ? imp->notes[index] : NULL;
}

int brg_import_weight_count(const brg_import *imp) { return imp ? imp->n_params : 0; }

brg_status brg_import_get_weight(const brg_import *imp, int index, brg_import_weight *out)
{
    if (!imp || !out || index < 0 || index >= imp->n_params)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_get_weight: no weight %d", index);
    const import_param *p = &imp->params[index];
    out->layer = p->layer;
    out->param = p->param;
    out->source = p->source;
    out->values = p->values;
    out->count = p->count;
    return BRG_OK;
}

brg_status brg_import_bind(brg_import *imp, const char *source, const float *values, int64_t count)
{
    if (!imp || !source || !values)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_bind: import, source and values must be given");
    int found = 0;
    for (int i = 0; i < imp->n_params; i++) {
        import_param *p = &imp->params[i];
        if (strcmp(p->source, source) != 0) continue;
        if (count != p->count)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_bind: '%s' has %lld values, not %lld", source,
                             (long long)p->count, (long long)count);
        BRG_CHECK(set_values(p, values));
        found = 1;
    }
    if (!found)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_bind: no weight of the model comes from '%s'", source);
    return BRG_OK;
}

int brg_import_has_weights(const brg_import *imp)
{
    if (!imp) return 0;
    for (int i = 0; i < imp->n_params; i++)
        if (!imp->params[i].values) return 0;
    return 1;
}

#ifndef BRG_HAVE_ONNX
int brg_import_onnx_available(void) { return 0; }

static brg_status no_onnx(brg_import **out)
{
    if (out) *out = NULL;
    return brg_error(BRG_ERR_UNSUPPORTED, "this brigade was built without the ONNX importer: install "
                                          "protobuf-c-compiler, libprotobuf-c-dev and libonnx-dev, then configure "
                                          "and build again");
}

brg_status brg_import_onnx(const char *path, brg_import **out)
{
    (void)path;
    return no_onnx(out);
}

brg_status brg_import_onnx_bytes(const void *data, size_t size, const char *source, brg_import **out)
{
    (void)data, (void)size, (void)source;
    return no_onnx(out);
}
#endif

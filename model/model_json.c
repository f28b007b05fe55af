/* JSON model files (docs/model-format.md): the reader, which goes through
 * the builder, so a file gets exactly the checks code gets (the writer, whose
 * output reads back to an equal model, is model_json_write.c).
 *
 * Every reader error names the file, the place in it (line and column, and
 * a path such as blocks[3].layers[2].kernel) and the reason. jansson keeps
 * no positions for values, so the line and column of a content error come
 * from a small scanner (locate) that follows the path through the text
 * jansson has already accepted. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "brigade/model.h"
#include "brigade/modelfile.h"
#include "base/internal.h"
#include "model/layers/layer-kind.h"
#include "model/import/formats.h"
#include "model/model-json.h"

/* Limits on sizes written in a file; the same as brg_model_create's on the
 * input, so a file cannot ask for a tensor whose element count overflows. */
#define MAX_CHANNELS BRG_LAYER_MAX_CHANNELS
#define MAX_EXTENT BRG_LAYER_MAX_EXTENT
#define MAX_FILE_BYTES ((size_t)256 << 20)

/* ---- fields of each object ---------------------------------------------- */

static const char *const top_fields[] = {"format", "version", "name", "comment", "input", "output", "blocks", NULL};
static const char *const input_fields[] = {"channels", "height", "width", NULL};
static const char *const block_fields[] = {"name", "comment", "layers", NULL};
static const char *const layer_fields[] = {"name", "type", "inputs", "output", "comment", NULL};

/* The keys of kind's fields (layer-kind.h), NULL-terminated in keys. */
static const char *const *kind_keys(brg_layer_kind kind, const char *keys[8])
{
    int n = 0;
    for (const brg_layer_field *f = brg_layer_kind_info_of(kind)->fields; f->key && n < 7; f++) keys[n++] = f->key;
    keys[n] = NULL;
    return keys;
}

/* ---- paths into the document -------------------------------------------- */

#define PATH_DEPTH 8

/* A path from the top-level object: component d is the key key[d], or the
 * array index index[d] where key[d] is NULL. Keys point into the document
 * or at string constants; a path never owns memory. */
typedef struct jpath {
    int depth;
    const char *key[PATH_DEPTH];
    int index[PATH_DEPTH];
} jpath;

static jpath path_key(jpath p, const char *key)
{
    if (p.depth < PATH_DEPTH) {
        p.key[p.depth] = key;
        p.index[p.depth] = 0;
        p.depth++;
    }
    return p;
}

static jpath path_index(jpath p, int index)
{
    if (p.depth < PATH_DEPTH) {
        p.key[p.depth] = NULL;
        p.index[p.depth] = index;
        p.depth++;
    }
    return p;
}

static void path_format(const jpath *p, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    if (p->depth == 0) {
        snprintf(buf, size, "top level");
        return;
    }
    for (int d = 0; d < p->depth && n < size; d++) {
        char key[80];
        int k;
        if (p->key[d])
            k = snprintf(buf + n, size - n, "%s%s", d ? "." : "", brg_text_clean(p->key[d], key, sizeof key, 60));
        else
            k = snprintf(buf + n, size - n, "[%d]", p->index[d]);
        if (k < 0) break;
        n += (size_t)k;
    }
}

/* ---- locating a path in the text ---------------------------------------- */

#define NOWHERE SIZE_MAX

static size_t skip_ws(const char *t, size_t n, size_t i)
{
    while (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) i++;
    return i;
}

/* t[i] is '"': the index just after the closing quote, or NOWHERE. */
static size_t skip_string(const char *t, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (t[i] == '\\')
            i++;
        else if (t[i] == '"')
            return i + 1;
    }
    return NOWHERE;
}

/* The index just after the value starting at t[i], or NOWHERE. Iterative,
 * so nesting depth cannot exhaust the stack. */
static size_t skip_value(const char *t, size_t n, size_t i)
{
    if (i >= n) return NOWHERE;
    if (t[i] == '"') return skip_string(t, n, i);
    if (t[i] == '{' || t[i] == '[') {
        size_t depth = 0;
        while (i < n) {
            char c = t[i];
            if (c == '"') {
                i = skip_string(t, n, i);
                if (i == NOWHERE) return NOWHERE;
                continue;
            }
            if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0) return i + 1;
            }
            i++;
        }
        return NOWHERE;
    }
    size_t start = i;
    while (i < n && !strchr(",]} \t\r\n", t[i])) i++;
    return i > start ? i : NOWHERE;
}

/* The byte offset of the value at path p in t[0..n), or NOWHERE when it
 * cannot be found (for example a key spelled with escapes). Meant for text
 * jansson has accepted, but checks every bound, so any text is safe. Keys
 * are unique (the reader rejects duplicates), so the first match is it. */
static size_t locate(const char *t, size_t n, const jpath *p)
{
    size_t i = skip_ws(t, n, 0);
    for (int d = 0; d < p->depth; d++) {
        if (i >= n) return NOWHERE;
        if (p->key[d]) {
            size_t len = strlen(p->key[d]);
            if (t[i] != '{') return NOWHERE;
            i++;
            for (;;) {
                i = skip_ws(t, n, i);
                if (i >= n || t[i] != '"') return NOWHERE;
                size_t end = skip_string(t, n, i);
                if (end == NOWHERE) return NOWHERE;
                int match = end - i - 2 == len && memcmp(t + i + 1, p->key[d], len) == 0;
                i = skip_ws(t, n, end);
                if (i >= n || t[i] != ':') return NOWHERE;
                i = skip_ws(t, n, i + 1);
                if (match) break;
                i = skip_value(t, n, i);
                if (i == NOWHERE) return NOWHERE;
                i = skip_ws(t, n, i);
                if (i >= n || t[i] != ',') return NOWHERE;
                i++;
            }
        } else {
            if (t[i] != '[') return NOWHERE;
            i = skip_ws(t, n, i + 1);
            for (int k = 0; k < p->index[d]; k++) {
                i = skip_value(t, n, i);
                if (i == NOWHERE) return NOWHERE;
                i = skip_ws(t, n, i);
                if (i >= n || t[i] != ',') return NOWHERE;
                i = skip_ws(t, n, i + 1);
            }
        }
    }
    return i < n ? i : NOWHERE;
}

/* ---- the reader's state and its messages -------------------------------- */

typedef struct reader {
    const char *source; /* the file name, for messages */
    const char *text;   /* the JSON text (after any byte order mark) */
    size_t length;
    const json_t *blocks; /* the "blocks" array, to find later writers */
    brg_model *model;
} reader;

/* "source:line:col: path (layer 'name')" into buf; line and column only when
 * the path can be found in the text. */
static void where(const reader *r, const jpath *p, const char *layer, char *buf, size_t size)
{
    char path[320];
    path_format(p, path, sizeof path);
    size_t off = locate(r->text, r->length, p);
    int n;
    if (off != NOWHERE) {
        long line = 1, col = 1;
        for (size_t i = 0; i < off; i++) {
            if (r->text[i] == '\n') {
                line++;
                col = 1;
            } else if (((unsigned char)r->text[i] & 0xC0) != 0x80) {
                col++;
            }
        }
        n = snprintf(buf, size, "%s:%ld:%ld: %s", r->source, line, col, path);
    } else {
        n = snprintf(buf, size, "%s: %s", r->source, path);
    }
    if (layer && n >= 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, " (layer '%s')", layer);
}

/* Record "where: reason" and return status. */
static brg_status fail(const reader *r, brg_status status, const jpath *p, const char *layer, const char *fmt, ...)
    BRG_PRINTF(5, 6);
static brg_status fail(const reader *r, brg_status status, const jpath *p, const char *layer, const char *fmt, ...)
{
    char at[512], reason[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    where(r, p, layer, at, sizeof at);
    return brg_error(status, "%s: %s", at, reason);
}

/* A builder call failed and left its message: put where in front of it. The
 * builder's BRG_ERR_INVALID_ARGUMENT means the file is wrong, so it becomes
 * BRG_ERR_FORMAT; BRG_ERR_SHAPE and BRG_ERR_HOST_MEMORY stay. */
static brg_status builder_fail(const reader *r, brg_status status, const jpath *p, const char *layer)
{
    char at[512];
    if (status == BRG_ERR_INVALID_ARGUMENT) status = BRG_ERR_FORMAT;
    where(r, p, layer, at, sizeof at);
    return brg_error_context(status, "%s", at);
}


/* A short description of a JSON value for "got ..." in messages. */
static const char *describe(const json_t *v, char *buf, size_t size)
{
    char s[80];
    switch (json_typeof(v)) {
    case JSON_OBJECT: snprintf(buf, size, "an object"); break;
    case JSON_ARRAY: snprintf(buf, size, "an array of %zu", json_array_size(v)); break;
    case JSON_STRING:
        snprintf(buf, size, "a string (\"%s\")", brg_text_clean(json_string_value(v), s, sizeof s, 40));
        break;
    case JSON_INTEGER: snprintf(buf, size, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: /* 1000.0 rather than 1e3, to show why it is not an integer */
        if (fabs(json_real_value(v)) < 1e15 && json_real_value(v) == floor(json_real_value(v)))
            snprintf(buf, size, "%.1f", json_real_value(v));
        else
            brg_json_format_number(json_real_value(v), 0, buf, size);
        break;
    case JSON_TRUE: snprintf(buf, size, "true"); break;
    case JSON_FALSE: snprintf(buf, size, "false"); break;
    default: snprintf(buf, size, "null"); break;
    }
    return buf;
}

/* For a number given where an integer belongs: why 1000.0 or 1e3 is not one. */
static const char *int_note(const json_t *v)
{
    return json_is_real(v) && json_real_value(v) == floor(json_real_value(v))
               ? " (write integers without a decimal point or exponent)"
               : "";
}

/* ---- near misses -------------------------------------------------------- */

static const char *list_at(const void *ctx, int i) { return ((const char *const *)ctx)[i]; }
static const char *kind_at(const void *ctx, int i)
{
    (void)ctx;
    return brg_layer_kind_name((brg_layer_kind)i);
}
static const char *tensor_at(const void *ctx, int i)
{
    return brg_model_get_tensor((const brg_model *)ctx, i)->name;
}

static int in_list(const char *const *list, const char *s)
{
    for (int i = 0; list && list[i]; i++)
        if (strcmp(list[i], s) == 0) return 1;
    return 0;
}

/* ---- fields ------------------------------------------------------------- */

/* Reject any key of obj not in base or extra (extra may be NULL); what
 * names the object in the message ("a conv2d layer", "the top level"). */
static brg_status check_fields(const reader *r, const json_t *obj, const jpath *at, const char *layer,
                               const char *what, const char *const *base, const char *const *extra)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        if (in_list(base, key) || in_list(extra, key)) continue;
        const char *all[24];
        int n = 0;
        for (int i = 0; base[i] && n < 23; i++) all[n++] = base[i];
        for (int i = 0; extra && extra[i] && n < 23; i++) all[n++] = extra[i];
        all[n] = NULL;
        char known[400] = "", hint[96], other[200] = "", k[80];
        size_t used = 0;
        for (int i = 0; i < n && used < sizeof known; i++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", all[i]);
        brg_text_suggest(key, list_at, all, n, hint, sizeof hint);
        if (extra) { /* a layer: say which kinds have the field */
            char kinds[160] = "";
            const char *keys[8];
            used = 0;
            for (int kind = 0; kind < BRG_LAYER_KIND_COUNT && used < sizeof kinds; kind++)
                if (in_list(kind_keys((brg_layer_kind)kind, keys), key))
                    used += (size_t)snprintf(kinds + used, sizeof kinds - used, "%s%s", used ? ", " : "",
                                             brg_layer_kind_name((brg_layer_kind)kind));
            if (used) snprintf(other, sizeof other, "; '%s' belongs to %s layers", key, kinds);
        }
        jpath p = path_key(*at, key);
        return fail(r, BRG_ERR_FORMAT, &p, layer, "unknown field '%s' in %s%s; its fields are: %s%s",
                    brg_text_clean(key, k, sizeof k, 60), what, hint, known, other);
    }
    return BRG_OK;
}

/* obj[key] or NULL; when required and absent, fails with what the field
 * should hold. */
static brg_status get_field(const reader *r, const json_t *obj, const char *key, const jpath *at, const char *layer,
                            int required, const char *expect, const json_t **v)
{
    *v = json_object_get(obj, key);
    if (!*v && required)
        return fail(r, BRG_ERR_FORMAT, at, layer, "missing required field '%s' (%s)", key, expect);
    return BRG_OK;
}

/* A required field that must hold a JSON value of the given type: missing,
 * or of another type, it fails saying it must be expect. */
static brg_status get_typed(const reader *r, const json_t *obj, const char *key, const jpath *at, const char *layer,
                            json_type type, const char *expect, const json_t **v)
{
    char got[96];
    BRG_CHECK(get_field(r, obj, key, at, layer, 1, expect, v));
    if (json_typeof(*v) != type) {
        jpath p = path_key(*at, key);
        return fail(r, BRG_ERR_FORMAT, &p, layer, "must be %s, got %s", expect, describe(*v, got, sizeof got));
    }
    return BRG_OK;
}

/* An integer field in lo..hi; absent and optional: *out = dflt. */
static brg_status get_int(const reader *r, const json_t *obj, const char *key, const jpath *at, const char *layer,
                          int required, long long lo, long long hi, int dflt, int *out)
{
    const json_t *v;
    char expect[64], got[96];
    snprintf(expect, sizeof expect, "an integer in %lld..%lld", lo, hi);
    BRG_CHECK(get_field(r, obj, key, at, layer, required, expect, &v));
    if (!v) {
        *out = dflt;
        return BRG_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        jpath p = path_key(*at, key);
        return fail(r, BRG_ERR_FORMAT, &p, layer, "must be %s, got %s%s", expect, describe(v, got, sizeof got),
                    int_note(v));
    }
    *out = (int)json_integer_value(v);
    return BRG_OK;
}

/* kernel, stride, padding: an integer n (meaning [n, n]) or [h, w], each
 * in lo..hi; absent and optional: both dflt. */
static brg_status get_pair(const reader *r, const json_t *obj, const char *key, const jpath *at, const char *layer,
                           int required, long long lo, long long hi, int dflt, int *h, int *w)
{
    const json_t *v;
    char expect[96], got[96];
    snprintf(expect, sizeof expect, "an integer or a [height, width] pair of integers in %lld..%lld", lo, hi);
    BRG_CHECK(get_field(r, obj, key, at, layer, required, expect, &v));
    jpath p = path_key(*at, key);
    if (!v) {
        *h = *w = dflt;
    } else if (json_is_integer(v)) {
        if (json_integer_value(v) < lo || json_integer_value(v) > hi)
            return fail(r, BRG_ERR_FORMAT, &p, layer, "must be %s, got %s", expect, describe(v, got, sizeof got));
        *h = *w = (int)json_integer_value(v);
    } else if (json_is_array(v) && json_array_size(v) == 2) {
        int hw[2];
        for (int k = 0; k < 2; k++) {
            const json_t *e = json_array_get(v, (size_t)k);
            if (!json_is_integer(e) || json_integer_value(e) < lo || json_integer_value(e) > hi) {
                jpath pe = path_index(p, k);
                return fail(r, BRG_ERR_FORMAT, &pe, layer, "the %s must be an integer in %lld..%lld, got %s%s",
                            k ? "width" : "height", lo, hi, describe(e, got, sizeof got), int_note(e));
            }
            hw[k] = (int)json_integer_value(e);
        }
        *h = hw[0];
        *w = hw[1];
    } else {
        return fail(r, BRG_ERR_FORMAT, &p, layer, "must be %s, got %s%s", expect, describe(v, got, sizeof got),
                    int_note(v));
    }
    return BRG_OK;
}

static brg_status get_bool(const reader *r, const json_t *obj, const char *key, const jpath *at, const char *layer,
                           int required, int dflt, int *out)
{
    const json_t *v;
    char got[96];
    BRG_CHECK(get_field(r, obj, key, at, layer, required, "true or false", &v));
    if (!v) {
        *out = dflt;
        return BRG_OK;
    }
    if (!json_is_boolean(v)) {
        jpath p = path_key(*at, key);
        return fail(r, BRG_ERR_FORMAT, &p, layer, "must be true or false, got %s", describe(v, got, sizeof got));
    }
    *out = json_is_true(v);
    return BRG_OK;
}

/* A number field read as float, in [lo, hi] (or [lo, hi) when hi_open;
 * lo_open likewise); absent: dflt. The range applies to the float value, so
 * 1e-60 for a positive epsilon is rejected (it would be 0). */
static brg_status get_float(const reader *r, const json_t *obj, const char *key, const jpath *at, const char *layer,
                            float lo, int lo_open, float hi, int hi_open, float dflt, float *out)
{
    const json_t *v = json_object_get(obj, key);
    char got[96], l[32], h[32];
    if (!v) {
        *out = dflt;
        return BRG_OK;
    }
    double x = json_is_number(v) ? json_number_value(v) : 0.0;
    float f = (float)x;
    if (!json_is_number(v) || !isfinite(f) || (lo_open ? !(f > lo) : !(f >= lo)) ||
        (hi_open ? !(f < hi) : !(f <= hi))) {
        jpath p = path_key(*at, key);
        const char *note = "";
        if (json_is_number(v) && !isfinite(f))
            note = " (too large for a float)";
        else if (json_is_number(v) && f == 0.0f && x != 0.0)
            note = " (0 as a float)";
        snprintf(l, sizeof l, "%g", (double)lo);
        if (isfinite(hi))
            snprintf(h, sizeof h, "%g", (double)hi);
        else
            snprintf(h, sizeof h, "infinity");
        return fail(r, BRG_ERR_FORMAT, &p, layer, "must be a number in %s%s, %s%s, got %s%s", lo_open ? "(" : "[", l,
                    h, hi_open ? ")" : "]", describe(v, got, sizeof got), note);
    }
    *out = f;
    return BRG_OK;
}

/* A name: a non-empty string shorter than BRG_NAME_MAX. */
static brg_status get_name(const reader *r, const json_t *obj, const char *key, const jpath *at, const char *layer,
                           int required, const char **out)
{
    const json_t *v;
    char got[96];
    *out = NULL;
    BRG_CHECK(get_field(r, obj, key, at, layer, required, "a name", &v));
    if (!v) return BRG_OK;
    jpath p = path_key(*at, key);
    if (!json_is_string(v) || json_string_length(v) == 0)
        return fail(r, BRG_ERR_FORMAT, &p, layer, "must be a non-empty string, got %s", describe(v, got, sizeof got));
    if (json_string_length(v) >= BRG_NAME_MAX || strlen(json_string_value(v)) != json_string_length(v))
        return fail(r, BRG_ERR_FORMAT, &p, layer, "names are at most %d bytes, got %s", BRG_NAME_MAX - 1,
                    describe(v, got, sizeof got));
    *out = json_string_value(v);
    return BRG_OK;
}

static brg_status check_comment(const reader *r, const json_t *obj, const jpath *at, const char *layer)
{
    const json_t *v = json_object_get(obj, "comment");
    char got[96];
    if (v && !json_is_string(v)) {
        jpath p = path_key(*at, "comment");
        return fail(r, BRG_ERR_FORMAT, &p, layer, "must be a string, got %s", describe(v, got, sizeof got));
    }
    return BRG_OK;
}

/* ---- layers ------------------------------------------------------------- */

/* The tensor a layer object writes: "output", else "name"; NULL if neither
 * is a string. Used on layers not read yet, so it assumes nothing. */
static const char *written_by(const json_t *layer)
{
    const json_t *v = json_object_get(layer, "output");
    if (!v) v = json_object_get(layer, "name");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Input name of layer (block b, layer l) is not a tensor yet: a forward
 * reference or cycle when a layer at or after it writes the name, else a
 * dangling name. */
static brg_status missing_tensor(const reader *r, const jpath *at, const char *layer, int b, int l,
                                 const char *tensor)
{
    char hint[96], name[80];
    brg_text_clean(tensor, name, sizeof name, 63);
    for (size_t bi = (size_t)b; bi < json_array_size(r->blocks); bi++) {
        const json_t *layers = json_object_get(json_array_get(r->blocks, bi), "layers");
        for (size_t li = bi == (size_t)b ? (size_t)l : 0; li < json_array_size(layers); li++) {
            const json_t *other = json_array_get(layers, li);
            const char *w = written_by(other);
            if (!w || strcmp(w, tensor) != 0) continue;
            if (bi == (size_t)b && li == (size_t)l)
                return fail(r, BRG_ERR_FORMAT, at, layer,
                            "cycle or forward reference: the layer reads its own output '%s'", name);
            const json_t *on = json_object_get(other, "name");
            char other_name[80];
            brg_text_clean(json_is_string(on) ? json_string_value(on) : "?", other_name, sizeof other_name, 63);
            return fail(r, BRG_ERR_FORMAT, at, layer,
                        "cycle or forward reference: tensor '%s' is written later, by layer '%s' at "
                        "blocks[%zu].layers[%zu]; a layer may read only the model input and outputs of layers "
                        "before it",
                        name, other_name, bi, li);
        }
    }
    brg_text_suggest(tensor, tensor_at, r->model, brg_model_tensor_count(r->model), hint, sizeof hint);
    return fail(r, BRG_ERR_FORMAT, at, layer,
                "no layer writes tensor '%s'%s; a layer may read the model input 'input' and outputs of layers "
                "before it",
                name, hint);
}

/* The path of layer index i: blocks[b].layers[k]. */
static jpath layer_path(const brg_model *m, int i)
{
    const brg_layer *l = brg_model_get_layer(m, i);
    int first, count;
    brg_model_block_layers(m, l->block, &first, &count);
    jpath top = {0};
    return path_index(path_key(path_index(path_key(top, "blocks"), l->block), "layers"), i - first);
}

/* Where layer index i sits, as text: "blocks[b].layers[k]". */
static void layer_place(const brg_model *m, int i, char *buf, size_t size)
{
    jpath p = layer_path(m, i);
    path_format(&p, buf, size);
}

/* The kind's fields of layer object obj into d (which holds the kind's
 * defaults). Which fields are required is documented in model-format.md. */
/* The fields of d's kind, each read as its table entry says (layer-kind.h);
 * an optional field that is absent keeps the kind's default. */
static brg_status read_desc(const reader *r, const json_t *obj, const jpath *at, const char *name, brg_layer_desc *d)
{
    for (const brg_layer_field *f = brg_layer_kind_info_of(d->kind)->fields; f->key; f++) {
        int *i = (int *)(void *)((char *)d + f->at), *i2 = (int *)(void *)((char *)d + f->at2);
        float *x = (float *)(void *)((char *)d + f->at);
        switch (f->type) {
        case BRG_FIELD_INT:
            BRG_CHECK(get_int(r, obj, f->key, at, name, f->required, (long long)f->lo, (long long)f->hi, *i, i));
            break;
        case BRG_FIELD_PAIR:
            BRG_CHECK(get_pair(r, obj, f->key, at, name, f->required, (long long)f->lo, (long long)f->hi, *i, i, i2));
            break;
        case BRG_FIELD_BOOL: BRG_CHECK(get_bool(r, obj, f->key, at, name, f->required, *i, i)); break;
        case BRG_FIELD_FLOAT:
            BRG_CHECK(get_float(r, obj, f->key, at, name, (float)f->lo, f->lo_open, (float)f->hi, f->hi_open, *x, x));
            break;
        }
    }
    return BRG_OK;
}

/* Read blocks[b].layers[l] and add it to the model. */
static brg_status read_layer(reader *r, int b, int l, const json_t *obj, const jpath *at)
{
    char got[96], other[64], s[80], hint[96];
    const char *name = NULL, *output = NULL;
    if (!json_is_object(obj))
        return fail(r, BRG_ERR_FORMAT, at, NULL, "a layer must be an object {\"name\": ..., \"type\": ...}, got %s",
                    describe(obj, got, sizeof got));
    BRG_CHECK(get_name(r, obj, "name", at, NULL, 1, &name));

    const json_t *tv;
    BRG_CHECK(get_typed(r, obj, "type", at, name, JSON_STRING, "a layer type such as \"conv2d\"", &tv));
    jpath tp = path_key(*at, "type");
    brg_layer_kind kind;
    if (brg_layer_kind_parse(json_string_value(tv), &kind) != BRG_OK) {
        char known[256];
        size_t used = 0;
        for (int k = 0; k < BRG_LAYER_KIND_COUNT && used < sizeof known; k++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", k ? ", " : "",
                                     brg_layer_kind_name((brg_layer_kind)k));
        return fail(r, BRG_ERR_FORMAT, &tp, name, "unknown layer type '%s'%s; known types: %s",
                    brg_text_clean(json_string_value(tv), s, sizeof s, 60),
                    brg_text_suggest(json_string_value(tv), kind_at, NULL, BRG_LAYER_KIND_COUNT, hint, sizeof hint),
                    known);
    }
    const brg_layer_kind_info *spec = brg_layer_kind_info_of(kind);
    const char *keys[8];
    char what[48];
    const char *kind_name = brg_layer_kind_name((brg_layer_kind)kind);
    snprintf(what, sizeof what, "%s %s layer", strchr("aeiou", kind_name[0]) ? "an" : "a", kind_name);
    BRG_CHECK(check_fields(r, obj, at, name, what, layer_fields, kind_keys(kind, keys)));
    BRG_CHECK(check_comment(r, obj, at, name));

    /* inputs: each must already exist */
    const json_t *iv;
    BRG_CHECK(get_typed(r, obj, "inputs", at, name, JSON_ARRAY, "an array of tensor names such as [\"input\"]", &iv));
    jpath ip = path_key(*at, "inputs");
    size_t n_inputs = json_array_size(iv);
    if (n_inputs < (size_t)spec->min_inputs || n_inputs > (size_t)spec->max_inputs) {
        if (spec->min_inputs == spec->max_inputs)
            return fail(r, BRG_ERR_FORMAT, &ip, name, "%s takes %d input%s, given %zu", what, spec->min_inputs,
                        spec->min_inputs == 1 ? "" : "s", n_inputs);
        return fail(r, BRG_ERR_FORMAT, &ip, name, "%s takes %d to %d inputs, given %zu", what, spec->min_inputs,
                    spec->max_inputs, n_inputs);
    }
    const char *inputs[BRG_LAYER_MAX_INPUTS];
    for (size_t k = 0; k < n_inputs; k++) {
        jpath ep = path_index(ip, (int)k);
        const json_t *e = json_array_get(iv, k);
        if (!json_is_string(e) || json_string_length(e) == 0)
            return fail(r, BRG_ERR_FORMAT, &ep, name, "must be a tensor name, got %s", describe(e, got, sizeof got));
        inputs[k] = json_string_value(e);
        if (brg_model_find_tensor(r->model, inputs[k]) < 0) return missing_tensor(r, &ep, name, b, l, inputs[k]);
    }

    /* output and names: unique, with the place of the first user */
    BRG_CHECK(get_name(r, obj, "output", at, name, 0, &output));
    jpath np = path_key(*at, "name");
    const char *out_name = output ? output : name;
    jpath op = output ? path_key(*at, "output") : np;
    int existing = brg_model_find_tensor(r->model, out_name);
    if (existing == brg_model_input(r->model))
        return fail(r, BRG_ERR_FORMAT, &op, name, "'%s' is the model input; the layer must write another tensor%s",
                    out_name, output ? "" : " (set \"output\" or rename the layer)");
    if (existing >= 0) {
        const int producer = brg_model_get_tensor(r->model, existing)->producer;
        const brg_layer *prev = brg_model_get_layer(r->model, producer);
        layer_place(r->model, producer, other, sizeof other);
        if (strcmp(prev->name, name) == 0)
            return fail(r, BRG_ERR_FORMAT, &np, NULL, "duplicate layer name '%s': %s already has it", name, other);
        return fail(r, BRG_ERR_FORMAT, &op, name, "duplicate tensor name '%s': layer '%s' at %s already writes it",
                    out_name, prev->name, other);
    }

    brg_layer_desc d = brg_layer_desc_init((brg_layer_kind)kind);
    BRG_CHECK(read_desc(r, obj, at, name, &d));
    brg_status st = brg_model_add(r->model, name, &d, inputs, (int)n_inputs, output);
    int dup = st == BRG_ERR_INVALID_ARGUMENT ? brg_model_find_layer(r->model, name) : -1;
    if (dup >= 0) {
        layer_place(r->model, dup, other, sizeof other);
        return fail(r, BRG_ERR_FORMAT, &np, NULL, "duplicate layer name '%s': %s already has it", name, other);
    }
    if (st != BRG_OK) return builder_fail(r, st, at, NULL);
    return BRG_OK;
}

static brg_status read_block(reader *r, int b, const json_t *obj, const jpath *at)
{
    char got[96], other[32];
    const char *name;
    if (!json_is_object(obj))
        return fail(r, BRG_ERR_FORMAT, at, NULL, "a block must be an object {\"name\": ..., \"layers\": [...]}, got %s",
                    describe(obj, got, sizeof got));
    BRG_CHECK(check_fields(r, obj, at, NULL, "a block", block_fields, NULL));
    BRG_CHECK(check_comment(r, obj, at, NULL));
    BRG_CHECK(get_name(r, obj, "name", at, NULL, 1, &name));
    jpath np = path_key(*at, "name");
    int dup = brg_model_find_block(r->model, name);
    if (dup >= 0) {
        snprintf(other, sizeof other, "blocks[%d]", dup);
        return fail(r, BRG_ERR_FORMAT, &np, NULL, "duplicate block name '%s': %s already has it", name, other);
    }
    const json_t *lv;
    BRG_CHECK(get_typed(r, obj, "layers", at, NULL, JSON_ARRAY, "an array of layers", &lv));
    jpath lp = path_key(*at, "layers");
    if (json_array_size(lv) == 0)
        return fail(r, BRG_ERR_FORMAT, &lp, NULL, "block '%s' has no layers; every block needs at least one", name);
    if (json_array_size(lv) > INT32_MAX)
        return fail(r, BRG_ERR_FORMAT, &lp, NULL, "too many layers");
    brg_status st = brg_model_begin_block(r->model, name);
    if (st != BRG_OK) return builder_fail(r, st, at, NULL);
    for (size_t l = 0; l < json_array_size(lv); l++) {
        jpath p = path_index(lp, (int)l);
        BRG_CHECK(read_layer(r, b, (int)l, json_array_get(lv, l), &p));
    }
    return BRG_OK;
}

/* The output, then the checks of brg_model_finalize with file places. */
static brg_status read_output(reader *r, const json_t *root)
{
    jpath top = {0};
    jpath op = path_key(top, "output");
    const char *output = NULL;
    char hint[96];
    brg_model *m = r->model;
    BRG_CHECK(get_name(r, root, "output", &top, NULL, 0, &output));
    int out;
    if (output) {
        out = brg_model_find_tensor(m, output);
        if (out < 0)
            return fail(r, BRG_ERR_FORMAT, &op, NULL,
                        "no layer writes tensor '%s'%s; the output names a layer's output", output,
                        brg_text_suggest(output, tensor_at, m, brg_model_tensor_count(m), hint, sizeof hint));
        if (out == brg_model_input(m))
            return fail(r, BRG_ERR_FORMAT, &op, NULL, "the output cannot be the model input");
    } else {
        out = brg_model_get_layer(m, brg_model_layer_count(m) - 1)->output;
    }
    const char *out_name = brg_model_get_tensor(m, out)->name;
    for (int t = 0; t < brg_model_tensor_count(m); t++) {
        const brg_model_tensor *x = brg_model_get_tensor(m, t);
        if (t == out || x->last_use_block >= 0) continue;
        if (x->producer < 0) {
            jpath bp = path_key(top, "blocks");
            return fail(r, BRG_ERR_FORMAT, &bp, NULL, "no layer reads the model input 'input'");
        }
        jpath lp = layer_path(m, x->producer);
        return fail(r, BRG_ERR_FORMAT, &lp, brg_model_get_layer(m, x->producer)->name,
                    "its output '%s' is never read; only the model output ('%s'%s) may be left unread", x->name,
                    out_name, output ? "" : ", the last layer's, as \"output\" is not given");
    }
    brg_status st = brg_model_finalize(m, out_name);
    if (st != BRG_OK) return builder_fail(r, st, output ? &op : &top, NULL);
    return BRG_OK;
}

static brg_status read_model(reader *r, const json_t *root)
{
    jpath top = {0};
    char got[96];
    const json_t *v;
    if (!json_is_object(root))
        return fail(r, BRG_ERR_FORMAT, &top, NULL,
                    "a model file must hold a JSON object {\"format\": \"%s\", ...}, got %s", FORMAT_NAME,
                    describe(root, got, sizeof got));

    BRG_CHECK(get_field(r, root, "format", &top, NULL, 1,
                        "\"format\": \"" FORMAT_NAME "\"; is this a brigade model file?", &v));
    jpath p = path_key(top, "format");
    if (!json_is_string(v) || strcmp(json_string_value(v), FORMAT_NAME) != 0)
        return fail(r, BRG_ERR_FORMAT, &p, NULL, "must be \"%s\", got %s", FORMAT_NAME, describe(v, got, sizeof got));
    BRG_CHECK(get_field(r, root, "version", &top, NULL, 1, "\"version\": 1", &v));
    p = path_key(top, "version");
    if (!json_is_integer(v))
        return fail(r, BRG_ERR_FORMAT, &p, NULL, "must be an integer, got %s", describe(v, got, sizeof got));
    if (json_integer_value(v) != FORMAT_VERSION)
        return fail(r, BRG_ERR_FORMAT, &p, NULL, "version %lld is not supported; this brigade reads version %d",
                    (long long)json_integer_value(v), FORMAT_VERSION);
    BRG_CHECK(check_fields(r, root, &top, NULL, "the top level", top_fields, NULL));
    BRG_CHECK(check_comment(r, root, &top, NULL));

    const char *name;
    BRG_CHECK(get_name(r, root, "name", &top, NULL, 1, &name));
    BRG_CHECK(get_field(r, root, "input", &top, NULL, 1, "{\"channels\": C, \"height\": H, \"width\": W}", &v));
    p = path_key(top, "input");
    if (!json_is_object(v))
        return fail(r, BRG_ERR_FORMAT, &p, NULL,
                    "must be an object {\"channels\": C, \"height\": H, \"width\": W}, got %s",
                    describe(v, got, sizeof got));
    BRG_CHECK(check_fields(r, v, &p, NULL, "input", input_fields, NULL));
    int c, h, w;
    BRG_CHECK(get_int(r, v, "channels", &p, NULL, 1, 1, MAX_CHANNELS, 0, &c));
    BRG_CHECK(get_int(r, v, "height", &p, NULL, 1, 1, MAX_EXTENT, 0, &h));
    BRG_CHECK(get_int(r, v, "width", &p, NULL, 1, 1, MAX_EXTENT, 0, &w));

    BRG_CHECK(get_typed(r, root, "blocks", &top, NULL, JSON_ARRAY, "an array of blocks", &v));
    p = path_key(top, "blocks");
    if (json_array_size(v) == 0)
        return fail(r, BRG_ERR_FORMAT, &p, NULL, "the model has no blocks; it needs at least one block with a layer");
    if (json_array_size(v) > INT32_MAX) return fail(r, BRG_ERR_FORMAT, &p, NULL, "too many blocks");
    r->blocks = v;

    brg_status st = brg_model_create(name, c, h, w, &r->model);
    if (st != BRG_OK) return builder_fail(r, st, &top, NULL);
    for (size_t b = 0; b < json_array_size(v); b++) {
        jpath bp = path_index(p, (int)b);
        BRG_CHECK(read_block(r, (int)b, json_array_get(v, b), &bp));
    }
    return read_output(r, root);
}

/* ---- reading: entry points ---------------------------------------------- */

brg_status brg_model_parse_json(const char *text, size_t length, const char *source, brg_model **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_parse_json: out is NULL");
    *out = NULL;
    if (!text && length) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_parse_json: text is NULL");
    if (!source) source = "<model text>";
    if (length >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) { /* a UTF-8 byte order mark, as some editors write */
        text += 3;
        length -= 3;
    }
    if (skip_ws(text, length, 0) == length)
        return brg_error(BRG_ERR_FORMAT,
                         "%s: the file is empty; a model file is a JSON object {\"format\": \"%s\", ...}",
                         source, FORMAT_NAME);

    json_error_t jerr;
    json_t *root = json_loadb(text, length, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root) {
        if (jerr.line > 0)
            return brg_error(BRG_ERR_FORMAT, "%s:%d:%d: invalid JSON: %s", source, jerr.line, jerr.column, jerr.text);
        return brg_error(BRG_ERR_FORMAT, "%s: invalid JSON: %s", source, jerr.text);
    }
    reader r = {source, text, length, NULL, NULL};
    brg_status st = read_model(&r, root);
    json_decref(root);
    if (st != BRG_OK) {
        brg_model_destroy(r.model);
        return st;
    }
    *out = r.model;
    return BRG_OK;
}

/* Whether text (a file's) opens as a brigade profile: "format" among its
 * first members. */
static int is_profile_json(const char *text, size_t length)
{
    char head[256];
    const size_t n = length < sizeof head - 1 ? length : sizeof head - 1;
    memcpy(head, text, n);
    head[n] = '\0';
    return strstr(head, "\"brigade-profile\"") && !strstr(head, "\"brigade-model\"");
}

brg_status brg_model_load_json(const char *path, brg_model **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_load_json: out is NULL");
    *out = NULL;
    if (!path) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_load_json: path is NULL");
    char *text;
    size_t length;
    BRG_CHECK(brg_refuse_model_folder(path));
    BRG_CHECK(brg_read_file(path, "model file", MAX_FILE_BYTES, &text, &length));
    /* Another kind of file: say what it is rather than where its bytes
     * stop being JSON; it is the wrong file given, not a broken model. */
    const char *hint = text && text[0] != '{' ? brg_foreign_model_hint(path, text, length) : NULL;
    /* brigade's other JSON file that commands take beside MODEL */
    if (!hint && text && is_profile_json(text, length))
        hint = "a profile of layer times ('brigade model profile -o'): give the model as MODEL and this file as "
               "--profile";
    if (hint) {
        free(text);
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s is not a brigade model file but %s (brigade reads its JSON "
                         "model files, ONNX files (.onnx) and Keras models (.json, .keras))", path, hint);
    }
    brg_status st = brg_model_parse_json(text ? text : "", length, path, out);
    free(text);
    return st;
}


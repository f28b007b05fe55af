/* JSON model files (docs/model-format.md): the writer. One layer per line,
 * every field of its kind written (defaults included), numbers in the
 * shortest form that reads back to the same float, so the output reads back
 * to an equal model (brg_model_equal) and diffs stay small. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "brigade/model.h"
#include "brigade/modelfile.h"
#include "base/internal.h"
#include "model/layers/layer-kind.h"
#include "model/model-json.h"

/* The shortest "%.*g" form of d (with a '.' whatever the locale) with at
 * most max_digits digits that strtod reads back to d, or, with as_float,
 * whose strtod value cast to float is (float)d. With as_float this is
 * exactly how the reader (jansson's strtod, then a cast) will see it. */
void brg_json_format_number(double d, int as_float, char *buf, size_t size)
{
    int max_digits = as_float ? 9 : 17;
    for (int p = 1; p <= max_digits; p++) {
        snprintf(buf, size, "%.*g", p, d);
        double back = strtod(buf, NULL);
        if (as_float ? (float)back == (float)d : back == d) break;
    }
    /* %g and strtod follow LC_NUMERIC, whose decimal point may not be '.':
     * whatever is neither digit, sign nor exponent is the point. Found in
     * the text, as localeconv() is not thread-safe. */
    size_t at = strspn(buf, "+-0123456789eE");
    if (buf[at]) {
        size_t len = strcspn(buf + at, "+-0123456789eE");
        buf[at] = '.';
        memmove(buf + at + 1, buf + at + len, strlen(buf + at + len) + 1);
    }
    char *e = strchr(buf, 'e'); /* "1e-05" -> "1e-5", "1e+20" -> "1e20" */
    if (e) {
        char *digits = e + 1, *from;
        if (*digits == '+') memmove(digits, digits + 1, strlen(digits));
        if (*digits == '-') digits++;
        for (from = digits; from[0] == '0' && from[1]; from++) {}
        memmove(digits, from, strlen(from) + 1);
    }
    if (!strpbrk(buf, ".e")) { /* looks like an integer: keep it a JSON real */
        size_t n = strlen(buf);
        if (n + 3 <= size) memcpy(buf + n, ".0", 3);
    }
}

/* Append a string literal. */
#define SB_LIT(b, lit) brg_text_put((b), (lit), sizeof(lit) - 1)

/* s as a JSON string, escaped by jansson. Fails (BRG_ERR_INVALID_ARGUMENT)
 * on text that is not UTF-8, which no JSON reader would take back; what
 * names the string in the message. */
static brg_status sb_string(brg_text *b, const char *s, const char *what)
{
    json_t *j = json_string(s);
    if (!j) {
        char c[80];
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "cannot write %s '%s' to JSON: it is not valid UTF-8", what,
                         brg_text_clean(s, c, sizeof c, 60));
    }
    char *e = json_dumps(j, JSON_ENCODE_ANY);
    json_decref(j);
    if (!e) return brg_error(BRG_ERR_HOST_MEMORY, "cannot encode %s '%s' as JSON", what, s);
    brg_text_put(b, e, strlen(e));
    free(e);
    return BRG_OK;
}

/* A float field; JSON has no infinity or NaN, so those fail
 * (BRG_ERR_INVALID_ARGUMENT, naming the layer). */
static brg_status sb_float(brg_text *b, const brg_layer *l, const char *key, float f)
{
    char num[48];
    if (!isfinite(f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "cannot write layer '%s' to JSON: its %s is %g", l->name, key,
                         (double)f);
    brg_json_format_number(f, 1, num, sizeof num);
    brg_text_printf(b, ", \"%s\": %s", key, num);
    return BRG_OK;
}

static void sb_pair(brg_text *b, const char *key, int h, int w) { brg_text_printf(b, ", \"%s\": [%d, %d]", key, h, w); }
static void sb_bool(brg_text *b, const char *key, int v)
{
    brg_text_printf(b, ", \"%s\": %s", key, v ? "true" : "false");
}

/* One layer on one line: name, type, inputs, output, then every field of
 * its kind (its table, layer-kind.h), defaults included, so the file says
 * everything. */
static brg_status write_layer(brg_text *b, const brg_model *m, const brg_layer *l)
{
    const brg_layer_desc *d = &l->desc;
    SB_LIT(b, "{\"name\": ");
    BRG_CHECK(sb_string(b, l->name, "layer name"));
    brg_text_printf(b, ", \"type\": \"%s\", \"inputs\": [", brg_layer_kind_name(d->kind));
    for (int k = 0; k < l->n_inputs; k++) {
        if (k) SB_LIT(b, ", ");
        BRG_CHECK(sb_string(b, brg_model_get_tensor(m, l->inputs[k])->name, "tensor name"));
    }
    SB_LIT(b, "], \"output\": ");
    BRG_CHECK(sb_string(b, brg_model_get_tensor(m, l->output)->name, "tensor name"));
    for (const brg_layer_field *f = brg_layer_kind_info_of(d->kind)->fields; f->key; f++) {
        const int *v = (const int *)(const void *)((const char *)d + f->at);
        const int *v2 = (const int *)(const void *)((const char *)d + f->at2);
        switch (f->type) {
        case BRG_FIELD_INT: brg_text_printf(b, ", \"%s\": %d", f->key, *v); break;
        case BRG_FIELD_PAIR: sb_pair(b, f->key, *v, *v2); break;
        case BRG_FIELD_BOOL: sb_bool(b, f->key, *v); break;
        case BRG_FIELD_FLOAT: BRG_CHECK(sb_float(b, l, f->key, *(const float *)(const void *)v)); break;
        }
    }
    SB_LIT(b, "}");
    return BRG_OK;
}

/* The document, laid out for people: two-space indentation down to the
 * layers, one layer per line (a layer per line keeps big models readable
 * and diffs small, which JSON_INDENT over every array would not). */
static brg_status write_model(brg_text *b, const brg_model *m)
{
    const brg_model_tensor *in = brg_model_get_tensor(m, brg_model_input(m));
    brg_text_printf(b, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"name\": ", FORMAT_NAME, FORMAT_VERSION);
    BRG_CHECK(sb_string(b, brg_model_name(m), "model name"));
    brg_text_printf(b, ",\n  \"input\": {\"channels\": %lld, \"height\": %lld, \"width\": %lld},\n  \"output\": ",
              (long long)in->c, (long long)in->h, (long long)in->w);
    BRG_CHECK(sb_string(b, brg_model_get_tensor(m, brg_model_output(m))->name, "tensor name"));
    SB_LIT(b, ",\n  \"blocks\": [\n");
    for (int blk = 0; blk < brg_model_block_count(m); blk++) {
        int first, count;
        brg_model_block_layers(m, blk, &first, &count);
        SB_LIT(b, "    {\n      \"name\": ");
        BRG_CHECK(sb_string(b, brg_model_block_name(m, blk), "block name"));
        SB_LIT(b, ",\n      \"layers\": [\n");
        for (int i = first; i < first + count; i++) {
            SB_LIT(b, "        ");
            BRG_CHECK(write_layer(b, m, brg_model_get_layer(m, i)));
            if (i + 1 < first + count) SB_LIT(b, ",");
            SB_LIT(b, "\n");
        }
        SB_LIT(b, "      ]\n    }");
        if (blk + 1 < brg_model_block_count(m)) SB_LIT(b, ",");
        SB_LIT(b, "\n");
    }
    SB_LIT(b, "  ]\n}\n");
    return BRG_OK;
}

brg_status brg_model_to_json(const brg_model *m, char **text)
{
    if (!text) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_to_json: text is NULL");
    *text = NULL;
    if (!m) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_to_json: model is NULL");
    if (!brg_model_is_final(m))
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "model '%s' is not finalized; call brg_model_finalize before writing it", brg_model_name(m));
    brg_text b = {0};
    brg_status st = write_model(&b, m);
    if (st == BRG_OK && b.failed) st = brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the JSON text of model '%s'",
                                                 brg_model_name(m));
    if (st != BRG_OK) {
        free(b.data);
        return st;
    }
    *text = b.data;
    return BRG_OK;
}

brg_status brg_model_save_json(const brg_model *m, const char *path)
{
    if (!path) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_save_json: path is NULL");
    char *text;
    BRG_CHECK(brg_model_to_json(m, &text));
    brg_status st = brg_write_file(path, "model file", text, strlen(text));
    free(text);
    return st;
}

/* Cut points: where one tensor alone is alive, a model can be cut into
 * blocks the partitioner may place apart (for Inception and ResNet, the
 * module boundaries: inside a module several branches, or the residual,
 * are alive at once), and finer blocks for a finer partition. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "model/cuts.h"

/* Kinds that read one tensor and are not worth a cut of their own: they
 * stay with the layer before (a convolution's BatchNorm and ReLU). */
static int follower(brg_layer_kind kind)
{
    return kind == BRG_LAYER_BATCHNORM || kind == BRG_LAYER_RELU || kind == BRG_LAYER_DROPOUT;
}

brg_status brg_model_cut_points(const brg_model *m, int first, int count, unsigned char *cut)
{
    const int nl = brg_model_layer_count(m), nt = brg_model_tensor_count(m);
    /* last[t]: the last layer reading tensor t (its producer when none);
     * alive[i]: tensors crossing the cut after layer first + i. */
    int *last = brg_malloc(((size_t)nt + 1) * sizeof *last, "the cut points");
    int *alive = brg_calloc((size_t)count + 1, sizeof *alive, "the cut points");
    if (!last || !alive) {
        free(last);
        free(alive);
        return BRG_ERR_HOST_MEMORY;
    }
    for (int t = 0; t < nt; t++) last[t] = brg_model_get_tensor(m, t)->producer;
    for (int i = 0; i < nl; i++) {
        const brg_layer *l = brg_model_get_layer(m, i);
        for (int k = 0; k < l->n_inputs; k++)
            if (last[l->inputs[k]] < i) last[l->inputs[k]] = i;
    }
    for (int t = 0; t < nt; t++) {
        const int from = brg_model_get_tensor(m, t)->producer; /* -1: the input */
        for (int at = from < first ? first : from; at < last[t] && at < first + count; at++) alive[at - first]++;
    }
    for (int i = 0; i + 1 < count; i++)
        cut[i] = alive[i] == 1 && !follower(brg_model_get_layer(m, first + i + 1)->desc.kind);
    free(last);
    free(alive);
    return BRG_OK;
}

void brg_model_range_name(const brg_model *m, int first, int count, char out[BRG_NAME_MAX])
{
    const char *a = brg_model_get_layer(m, first)->name;
    size_t len = strlen(a);
    for (int i = first + 1; i < first + count; i++) {
        const char *b = brg_model_get_layer(m, i)->name;
        size_t k = 0;
        while (k < len && b[k] == a[k]) k++;
        len = k;
    }
    while (len > 0) { /* back to a whole component */
        int whole = a[len] == '\0' || a[len] == '.' || a[len] == '_';
        for (int i = first + 1; whole && i < first + count; i++) {
            const char c = brg_model_get_layer(m, i)->name[len];
            whole = c == '\0' || c == '.' || c == '_';
        }
        if (whole) break;
        len--;
    }
    if (len == 0) {
        for (int i = first; i < first + count; i++) {
            const brg_layer *l = brg_model_get_layer(m, i);
            if (l->desc.kind == BRG_LAYER_CONCAT || l->desc.kind == BRG_LAYER_ADD) a = l->name;
        }
        len = strlen(a);
    }
    memcpy(out, a, len);
    out[len] = '\0';
}

static int block_name_taken(const brg_model *m, const brg_model *reserved, int own, const char *name)
{
    if (brg_model_find_block(m, name) >= 0) return 1;
    const int r = reserved ? brg_model_find_block(reserved, name) : -1;
    return r >= 0 && r != own;
}

void brg_model_unique_block_name(const brg_model *m, const brg_model *reserved, int own, const char *base,
                                 char name[BRG_NAME_MAX])
{
    snprintf(name, BRG_NAME_MAX, "%s", base);
    for (int k = 2; block_name_taken(m, reserved, own, name); k++) {
        char suffix[16];
        const int ns = snprintf(suffix, sizeof suffix, "_%d", k);
        snprintf(name, BRG_NAME_MAX, "%.*s%s", BRG_NAME_MAX - 1 - ns, base, suffix);
    }
}

brg_status brg_model_split_blocks(const brg_model *m, brg_model **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_split_blocks: out is NULL");
    *out = NULL;
    if (!m || !brg_model_is_final(m))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_model_split_blocks: a finalized model is needed");
    const brg_model_tensor *in = brg_model_get_tensor(m, brg_model_input(m));
    unsigned char *cut = brg_calloc((size_t)brg_model_layer_count(m) + 1, 1, "the cut points");
    if (!cut) return BRG_ERR_HOST_MEMORY;
    brg_model *fine = NULL;
    brg_status st = brg_model_create(brg_model_name(m), in->c, in->h, in->w, &fine);
    for (int b = 0; b < brg_model_block_count(m) && st == BRG_OK; b++) {
        int first, count;
        brg_model_block_layers(m, b, &first, &count);
        st = brg_model_cut_points(m, first, count, cut);
        for (int start = first, end; start < first + count && st == BRG_OK; start = end) {
            for (end = start + 1; end < first + count && !cut[end - 1 - first];) end++;
            char base[BRG_NAME_MAX], name[BRG_NAME_MAX];
            /* An uncut block keeps its name; a part is named after its layers,
             * never after another block of m (which keeps its own). */
            if (end - start == count) snprintf(base, sizeof base, "%s", brg_model_block_name(m, b));
            else brg_model_range_name(m, start, end - start, base);
            brg_model_unique_block_name(fine, m, b, base, name);
            st = brg_model_begin_block(fine, name);
            for (int i = start; i < end && st == BRG_OK; i++) {
                const brg_layer *l = brg_model_get_layer(m, i);
                const char *inputs[BRG_LAYER_MAX_INPUTS];
                for (int k = 0; k < l->n_inputs; k++) inputs[k] = brg_model_get_tensor(m, l->inputs[k])->name;
                st = brg_model_add(fine, l->name, &l->desc, inputs, l->n_inputs,
                                   brg_model_get_tensor(m, l->output)->name);
            }
        }
    }
    free(cut);
    if (st == BRG_OK) st = brg_model_finalize(fine, brg_model_get_tensor(m, brg_model_output(m))->name);
    if (st != BRG_OK) {
        brg_model_destroy(fine);
        return brg_error_context(st, "cutting model '%s' finer", brg_model_name(m));
    }
    *out = fine;
    return BRG_OK;
}

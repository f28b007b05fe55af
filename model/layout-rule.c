/* The layout rule (layout-rule.h): a union-find over the tensors, each
 * layer tying or freeing its tensors by its kind's `blocks`. */
#include <stdlib.h>

#include "base/internal.h"
#include "model/layers/layer-kind.h"
#include "model/layout-rule.h"

/* The root of t's class in the union-find forest parent[]. */
static int layout_root(int *parent, int t)
{
    while (parent[t] != t) t = parent[t] = parent[parent[t]];
    return t;
}

brg_status brg_model_choose_layouts(const brg_model *m, int block, int first, int end,
                                    const unsigned char *keep_plain, int *layout)
{
    const int nt = brg_model_tensor_count(m);
    for (int t = 0; t < nt; t++) layout[t] = 0;
    if (block <= 0) return BRG_OK;
    int *parent = brg_malloc((size_t)nt * sizeof *parent, "tensor layouts");
    unsigned char *plain = brg_calloc((size_t)nt, 1, "tensor layouts");
    if (!parent || !plain) {
        free(parent);
        free(plain);
        return BRG_ERR_HOST_MEMORY;
    }
    for (int t = 0; t < nt; t++) {
        parent[t] = t;
        plain[t] = brg_model_get_tensor(m, t)->c % block != 0 || (keep_plain && keep_plain[t]);
    }
    plain[brg_model_input(m)] = 1;
    plain[brg_model_output(m)] = 1;
    for (int l = first; l < end; l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        switch (brg_layer_kind_info_of(ly->desc.kind)->blocks) {
        case BRG_BLOCKS_EACH: break;
        case BRG_BLOCKS_TIED:
            for (int k = 0; k < ly->n_inputs; k++)
                parent[layout_root(parent, ly->inputs[k])] = layout_root(parent, ly->output);
            break;
        case BRG_BLOCKS_INPUT: plain[ly->output] = 1; break;
        default:
            for (int k = 0; k < ly->n_inputs; k++) plain[ly->inputs[k]] = 1;
            plain[ly->output] = 1;
            break;
        }
    }
    for (int t = 0; t < nt; t++)
        if (plain[t]) plain[layout_root(parent, t)] = 1;
    for (int t = 0; t < nt; t++) layout[t] = plain[layout_root(parent, t)] ? 0 : block;
    free(parent);
    free(plain);
    return BRG_OK;
}

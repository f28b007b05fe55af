/* Cut points of a flat layer list: where one tensor alone is alive, the
 * model can be cut into blocks the partitioner may place apart (for
 * Inception and ResNet, the module boundaries: inside a module several
 * branches, or the residual, are alive at once). */
#include <stdlib.h>
#include <string.h>

#include "model/import/import-impl.h"

/* Index of the layer making tensor name among layers[0..n), -1 for the
 * model input. Layers read only earlier layers, so search backwards. */
static int producer(const import_layer *layers, int before, const char *name)
{
    for (int i = before - 1; i >= 0; i--)
        if (strcmp(layers[i].name, name) == 0) return i;
    return -1;
}

/* Kinds that read one tensor and are not worth a cut of their own: they
 * stay with the layer before (a convolution's BatchNorm and ReLU). */
static int follower(brg_layer_kind kind)
{
    return kind == BRG_LAYER_BATCHNORM || kind == BRG_LAYER_RELU || kind == BRG_LAYER_DROPOUT;
}

brg_status import_find_cuts(const import_layer *layers, int n, int *start, int *n_blocks)
{
    /* last_use[p + 1]: the last layer reading layer p's output (p = -1:
     * the input); alive[i]: tensors crossing the cut after layer i. */
    int *last_use = brg_malloc(((size_t)n + 1) * sizeof *last_use, "the cut points");
    int *alive = brg_calloc((size_t)n + 1, sizeof *alive, "the cut points");
    if (!last_use || !alive) {
        free(last_use);
        free(alive);
        return BRG_ERR_HOST_MEMORY;
    }
    for (int i = 0; i <= n; i++) last_use[i] = i - 1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < layers[i].n_inputs; k++) {
            const int p = producer(layers, i, layers[i].inputs[k]);
            if (last_use[p + 1] < i) last_use[p + 1] = i;
        }
    for (int p = -1; p < n; p++)
        for (int cut = p < 0 ? 0 : p; cut < last_use[p + 1]; cut++) alive[cut]++;
    int b = 0;
    start[b++] = 0;
    for (int i = 0; i + 1 < n; i++)
        if (alive[i] == 1 && !follower(layers[i + 1].desc.kind)) start[b++] = i + 1;
    start[b] = n;
    *n_blocks = b;
    free(last_use);
    free(alive);
    return BRG_OK;
}

void import_block_name(const import_layer *layers, int first, int count, char out[BRG_NAME_MAX])
{
    /* The common prefix of whole components ("layer1.0" of PyTorch's
     * "layer1.0.conv1", "conv2_block1" of Keras's "conv2_block1_1_conv"). */
    size_t len = strlen(layers[first].name);
    for (int i = first + 1; i < first + count; i++) {
        size_t k = 0;
        while (k < len && layers[i].name[k] == layers[first].name[k]) k++;
        len = k;
    }
    const char *a = layers[first].name;
    while (len > 0) {
        int whole = a[len] == '\0' || a[len] == '.' || a[len] == '_';
        for (int i = first + 1; whole && i < first + count; i++) {
            const char c = layers[i].name[len];
            whole = c == '\0' || c == '.' || c == '_';
        }
        if (whole) break;
        len--;
    }
    if (len == 0) {
        /* No common prefix (Keras's "conv2d_5", "activation_7"): the block
         * is named after the layer that joins its branches ("mixed0"),
         * else after its first layer. */
        for (int i = first; i < first + count; i++)
            if (layers[i].desc.kind == BRG_LAYER_CONCAT || layers[i].desc.kind == BRG_LAYER_ADD) a = layers[i].name;
        len = strlen(a);
    }
    memcpy(out, a, len);
    out[len] = '\0';
}

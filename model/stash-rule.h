/* brigade: the stash rule, which layers' backward reads their input or
 * output activation (private). lib/stage.c keeps and frees activations by
 * it, and the cost model (partitioner/cost.c) replays it in bytes, so both
 * take it from here (docs/training.md). */
#ifndef BRIGADE_STASH_RULE_H
#define BRIGADE_STASH_RULE_H

#include "brigade/model.h"

/* The backward reads the layer's input x. */
static inline int brg_backward_reads_input(brg_layer_kind k)
{
    return k == BRG_LAYER_CONV2D || k == BRG_LAYER_LINEAR || k == BRG_LAYER_BATCHNORM || k == BRG_LAYER_MAXPOOL;
}

/* The backward reads the layer's output y. */
static inline int brg_backward_reads_output(brg_layer_kind k) { return k == BRG_LAYER_RELU || k == BRG_LAYER_MAXPOOL; }

/* A weight gradient that the split backward (ZB-H1) defers to its weight
 * part, which reads x and dy. */
static inline int brg_backward_has_weight_part(brg_layer_kind k)
{
    return k == BRG_LAYER_CONV2D || k == BRG_LAYER_LINEAR;
}

#endif /* BRIGADE_STASH_RULE_H */

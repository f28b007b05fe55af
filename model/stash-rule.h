/* brigade: the stash rule, which layers' backward reads their input or
 * output activation (private). The stages keep and free activations by it
 * (train/), and the cost model (plan/cost.c) replays it in bytes, so both
 * take it from here; each kind says it in its file (model/layers/,
 * docs/training.md). */
#ifndef BRIGADE_STASH_RULE_H
#define BRIGADE_STASH_RULE_H

#include "brigade/model.h"
#include "model/layers/layer-kind.h"

/* The backward reads the layer's input x. */
static inline int brg_backward_reads_input(brg_layer_kind k)
{
    const brg_layer_kind_info *info = brg_layer_kind_info_of(k);
    return info && info->backward_reads_input;
}

/* The backward reads the layer's output y. */
static inline int brg_backward_reads_output(brg_layer_kind k)
{
    const brg_layer_kind_info *info = brg_layer_kind_info_of(k);
    return info && info->backward_reads_output;
}

/* A weight gradient that the split backward (ZB-H1) defers to its weight
 * part, which reads x and dy. */
static inline int brg_backward_has_weight_part(brg_layer_kind k)
{
    const brg_layer_kind_info *info = brg_layer_kind_info_of(k);
    return info && info->backward_weight;
}

#endif /* BRIGADE_STASH_RULE_H */

/* brigade: the layout rule, which activations are channel-blocked
 * (private). The stages lay their tensors out by it (train/), and the CPU
 * calibration times each layer in the layout it will run in (plan/), so
 * both take it from here; each kind says how it takes its tensors in its
 * file (model/layers/, the kind's `blocks`). */
#ifndef BRIGADE_LAYOUT_RULE_H
#define BRIGADE_LAYOUT_RULE_H

#include "brigade/model.h"
#include "brigade/status.h"

/* layout[t] for every tensor t of m: `block` where tensor t is blocked by
 * that many channels, 0 where it stays plain NCHW, as the layers [first,
 * end) take them. Tensors whose every layer around them takes them
 * blocked, with channels a multiple of the block, are blocked; layers that
 * take their tensors in one layout (BatchNorm, ReLU, concat, add) tie them
 * into one class, blocked only as a whole. The model input and the loss's
 * input stay plain, and so does every class holding a tensor flagged in
 * keep_plain (NULL: none). block 0 leaves everything plain. */
brg_status brg_model_choose_layouts(const brg_model *m, int block, int first, int end,
                                    const unsigned char *keep_plain, int *layout);

#endif /* BRIGADE_LAYOUT_RULE_H */

/* brigade: models as ordered blocks of layers.
 *
 * A model is a sequence of blocks; the partitioner cuts only between blocks.
 * Each block is a small DAG of layers (Inception branches joined by a concat,
 * a ResNet bottleneck with its residual add). Layers read and write named
 * tensors; a layer may read any tensor made earlier in the model, also many
 * blocks back (a U-Net skip). Shapes are per sample, [C, H, W]: the batch
 * dimension is added when the model runs. A fully connected layer's output
 * is [F, 1, 1].
 *
 * Build with brg_model_create, brg_model_begin_block and the brg_model_add_*
 * calls (each infers the output shape and reports a mismatch naming the
 * layer, the expected and the actual shapes), then brg_model_finalize, which
 * fixes the output and computes what crosses each block boundary. A
 * finalized model is read-only and can be shared between threads.
 */
#ifndef BRIGADE_MODEL_H
#define BRIGADE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_model brg_model;

typedef enum brg_layer_kind {
    BRG_LAYER_CONV2D = 0,
    BRG_LAYER_BATCHNORM,
    BRG_LAYER_RELU,
    BRG_LAYER_MAXPOOL,
    BRG_LAYER_AVGPOOL,
    BRG_LAYER_GLOBAL_AVGPOOL,
    BRG_LAYER_CONCAT,
    BRG_LAYER_ADD,
    BRG_LAYER_LINEAR,
    BRG_LAYER_DROPOUT,
    BRG_LAYER_UPSAMPLE,
    BRG_LAYER_KIND_COUNT
} brg_layer_kind;

/* Everything that describes one layer apart from its tensors. Fields that do
 * not apply to a kind are ignored (and written as 0 by brg_layer_desc_init). */
typedef struct brg_layer_desc {
    brg_layer_kind kind;
    /* conv2d: out_channels; linear: out_features (stored in out_channels) */
    int out_channels;
    /* conv2d and pools */
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;
    int bias;              /* conv2d, linear: 1 if the layer has a bias */
    int count_include_pad; /* avgpool */
    /* batchnorm */
    float epsilon, momentum;
    int scale;             /* 1: learnable gamma (torchvision); 0: none (Keras Inception) */
    int center;            /* 1: learnable beta */
    /* dropout */
    float rate;
    /* upsample (nearest neighbour) */
    int factor;
} brg_layer_desc;

#define BRG_NAME_MAX 64
#define BRG_LAYER_MAX_INPUTS 16

/* A named tensor of the model, per sample. */
typedef struct brg_model_tensor {
    char name[BRG_NAME_MAX];
    int64_t c, h, w;
    int producer;       /* layer index, or -1 for the model input */
    int block;          /* block of the producer; -1 for the input */
    int last_use_block; /* last block that reads it; -1 if none (the output) */
} brg_model_tensor;

/* A parameter tensor of a layer. */
typedef struct brg_param_info {
    const char *name;   /* "weight", "bias", "gamma", "beta", "running_mean", "running_var" */
    int ndim;
    int64_t shape[4];
    int64_t count;
    int trainable;      /* running statistics are not */
} brg_param_info;

typedef struct brg_layer {
    char name[BRG_NAME_MAX];
    brg_layer_desc desc;
    int block;
    int n_inputs;
    int inputs[BRG_LAYER_MAX_INPUTS]; /* tensor indices */
    int output;                       /* tensor index */
    int64_t trainable_params;
    int64_t frozen_params;            /* BatchNorm running statistics */
} brg_layer;

/* ---- building ---- */

/* A description of kind with the defaults everyone expects: stride 1,
 * padding 0, bias off, BatchNorm epsilon 1e-5 momentum 0.1 with scale and
 * center, dropout 0.5, upsample factor 2. */
BRG_API brg_layer_desc brg_layer_desc_init(brg_layer_kind kind);

/* A new model whose input is a tensor "input" of [channels, height, width]. */
BRG_API brg_status brg_model_create(const char *name, int64_t channels, int64_t height, int64_t width,
                                    brg_model **out);
BRG_API void brg_model_destroy(brg_model *model);

/* Start a new block; layers added next belong to it. Names are unique. */
BRG_API brg_status brg_model_begin_block(brg_model *model, const char *name);

/* Add a layer reading inputs[0..n_inputs) and writing a new tensor named
 * output (NULL: the layer's own name). Checks the kind's parameters and
 * infers the output shape; an input that does not exist, a duplicate name,
 * or shapes that do not fit give BRG_ERR_INVALID_ARGUMENT / BRG_ERR_SHAPE
 * with the layer's name and the expected and actual shapes. */
BRG_API brg_status brg_model_add(brg_model *model, const char *name, const brg_layer_desc *desc,
                                 const char *const *inputs, int n_inputs, const char *output);

/* Shorthands for brg_model_add with one input; output named like the layer. */
BRG_API brg_status brg_model_add_conv2d(brg_model *model, const char *name, const char *input, int out_channels,
                                        int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_h,
                                        int pad_w, int bias);
BRG_API brg_status brg_model_add_batchnorm(brg_model *model, const char *name, const char *input, float epsilon,
                                           int scale, int center);
BRG_API brg_status brg_model_add_relu(brg_model *model, const char *name, const char *input);
BRG_API brg_status brg_model_add_maxpool(brg_model *model, const char *name, const char *input, int kernel,
                                         int stride, int pad);
BRG_API brg_status brg_model_add_avgpool(brg_model *model, const char *name, const char *input, int kernel,
                                         int stride, int pad, int count_include_pad);
BRG_API brg_status brg_model_add_global_avgpool(brg_model *model, const char *name, const char *input);
BRG_API brg_status brg_model_add_linear(brg_model *model, const char *name, const char *input, int out_features,
                                        int bias);
BRG_API brg_status brg_model_add_dropout(brg_model *model, const char *name, const char *input, float rate);
BRG_API brg_status brg_model_add_upsample(brg_model *model, const char *name, const char *input, int factor);
BRG_API brg_status brg_model_add_concat(brg_model *model, const char *name, const char *const *inputs,
                                        int n_inputs);
BRG_API brg_status brg_model_add_add(brg_model *model, const char *name, const char *a, const char *b);

/* Finish the model: output names the tensor the loss reads (the logits:
 * [classes, 1, 1] for classifiers, [classes, H, W] for segmentation such as
 * U-Net); NULL means the last layer's output. Fails on an empty
 * model, an empty block, or tensors computed but never used. */
BRG_API brg_status brg_model_finalize(brg_model *model, const char *output);

/* The same model with each block cut further wherever one tensor alone
 * crosses between its layers (never just before a BatchNorm, ReLU or
 * Dropout, which stay with the layer they follow): finer blocks, so that
 * the partitioner can cut a large block (Inception-v3's stem) between
 * stages (`--cuts fine`). Layers, tensors, parameters and outputs are the
 * same, so weights and checkpoints carry over; an uncut block keeps its
 * name, the parts of a cut one are named after their layers
 * ("stem.Conv2d_1a_3x3"). */
BRG_API brg_status brg_model_split_blocks(const brg_model *model, brg_model **out);

/* ---- reading ---- */

BRG_API const char *brg_model_name(const brg_model *model);
BRG_API int brg_model_is_final(const brg_model *model);
BRG_API int brg_model_block_count(const brg_model *model);
BRG_API const char *brg_model_block_name(const brg_model *model, int block);
/* Layers of a block are [first, first + count). */
BRG_API void brg_model_block_layers(const brg_model *model, int block, int *first, int *count);
/* Index of the block named name, or -1. */
BRG_API int brg_model_find_block(const brg_model *model, const char *name);

BRG_API int brg_model_layer_count(const brg_model *model);
/* Index of the layer named name, or -1. */
BRG_API int brg_model_find_layer(const brg_model *model, const char *name);
BRG_API const brg_layer *brg_model_get_layer(const brg_model *model, int layer);
BRG_API int brg_model_tensor_count(const brg_model *model);
BRG_API const brg_model_tensor *brg_model_get_tensor(const brg_model *model, int tensor);
/* Index of the tensor named name, or -1. */
BRG_API int brg_model_find_tensor(const brg_model *model, const char *name);
BRG_API int brg_model_input(const brg_model *model);  /* tensor index of "input" */
BRG_API int brg_model_output(const brg_model *model); /* tensor index of the logits */
BRG_API int64_t brg_model_classes(const brg_model *model);
/* Labels per sample: 1 for class logits [classes, 1, 1], H x W for
 * per-pixel logits [classes, H, W] (segmentation). */
BRG_API int64_t brg_model_label_count(const brg_model *model);

/* Tensors that cross the boundary after block `boundary` (between blocks
 * boundary and boundary + 1): made at or before it (or the model input),
 * read after it. Writes up to max indices into ids and the number in
 * *count. Requires a finalized model. */
BRG_API brg_status brg_model_boundary_tensors(const brg_model *model, int boundary, int *ids, int max,
                                              int *count);

BRG_API int64_t brg_model_trainable_params(const brg_model *model);
BRG_API int64_t brg_model_frozen_params(const brg_model *model);

/* Parameters of a layer: count and the description of each. */
BRG_API int brg_layer_param_count(const brg_layer *layer, const brg_model *model);
BRG_API brg_status brg_layer_param(const brg_layer *layer, const brg_model *model, int index,
                                   brg_param_info *info);

/* Fill a parameter with its initial values, reproducibly: the values depend
 * on seed, the layer's name and the parameter only, not on where the layer
 * runs. Convolutions get He (Kaiming) normal over fan-in; linear layers
 * Glorot uniform; biases and beta 0; gamma 1; running mean 0, variance 1. */
BRG_API brg_status brg_layer_init_param(const brg_layer *layer, const brg_model *model, int index, uint64_t seed,
                                        float *values);

/* Name of a layer kind as written in model files ("conv2d"), and back
 * (BRG_ERR_INVALID_ARGUMENT with a message for an unknown name). */
BRG_API const char *brg_layer_kind_name(brg_layer_kind kind);
BRG_API brg_status brg_layer_kind_parse(const char *name, brg_layer_kind *kind);

/* Whether two models have the same blocks, layers, parameters and tensors.
 * On a difference returns 0 and, if why is not NULL, describes the first one. */
BRG_API int brg_model_equal(const brg_model *a, const brg_model *b, char *why, size_t why_size);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_MODEL_H */

/* The CUDA backend's ops besides convolutions and fully connected layers:
 * our own kernels (ops_kernels.cu, through cuda-launch.h), with the CPU
 * backend's semantics by construction (see conv.c for why these are not
 * cuDNN's). */
#include "config.h"

#include <math.h>
#include <string.h>

#include "backends/cuda/cuda-exec.h" /* first: the cuDNN and cuBLAS headers the others test for */
#include "backends/cuda/cuda-check.h"
#include "base/internal.h"

/* The geometry of a pool between its full-resolution tensor big and its
 * pooled one small. pool-window.h works in int inside a plane: refused
 * (never met by a real model) where a plane or window is too large for it. */
static brg_status pool_geom(const brg_op *op, const brg_tensor *big, const brg_tensor *small, brg_cuda_pool_geom *g)
{
    const brg_pool_params *pp = &op->p.pool;
    const int64_t most = (int64_t)1 << 29, h = big->shape[2], w = big->shape[3];
    const int64_t pooled = small->shape[2] * small->shape[3];
    if (h > most || w > most || h * w > INT32_MAX || pooled > INT32_MAX || pp->kernel_h > most ||
        pp->kernel_w > most)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: the CUDA pools take planes of under 2^31 elements, in and out, with sides and windows "
                         "of at most 2^29, not a %lldx%lld plane pooled to %lldx%lld by a %dx%d window",
                         brg_op_kind_name(op->kind), (long long)h, (long long)w, (long long)small->shape[2],
                         (long long)small->shape[3], pp->kernel_h, pp->kernel_w);
    *g = (brg_cuda_pool_geom){big->shape[0] * big->shape[1], (int)h, (int)w, (int)small->shape[2],
                              (int)small->shape[3], pp->kernel_h, pp->kernel_w, pp->stride_h, pp->stride_w,
                              pp->pad_h, pp->pad_w, pp->count_include_pad};
    return BRG_OK;
}

/* The planned workspace (brg_cuda_workspace_bytes) reached the op: at least
 * need bytes of it. */
static brg_status workspace_given(const brg_cuda_exec *e, const brg_op *op, size_t need)
{
    if (need == 0 || (op->workspace && op->workspace_bytes >= need)) return BRG_OK;
    return brg_error(BRG_ERR_INTERNAL, "%s on %s: given %zu bytes of workspace, needs %zu", brg_op_kind_name(op->kind),
                     e->name, op->workspace ? op->workspace_bytes : 0, need);
}

brg_status brg_cuda_op_batchnorm(brg_device *dev, const brg_op *op)
{
    brg_cuda_exec *e = brg_cuda_exec_of(dev);
    const brg_tensor *x = op->in[0];
    const int64_t n = x->shape[0], c = x->shape[1], plane = x->shape[2] * x->shape[3];
    const double eps = op->p.bn.epsilon;
    const int splits = brg_cuda_bn_splits(c, n * plane);
    const size_t need = brg_cuda_bn_workspace_bytes(op);
    BRG_CHECK(workspace_given(e, op, need));
    switch (op->kind) {
    case BRG_OP_BATCHNORM_FORWARD_TRAIN:
        BRG_CUDA_CHECK(brg_cuda_bn_forward_train(e->stream, fdata(x), fdata(opt_in(op, 1)), fdata(opt_in(op, 2)),
                                                 fdata(op->out[0]), fdata(op->out[1]), fdata(op->out[2]),
                                                 fdata(op->out[3]), fdata(op->out[4]), n, c, plane, eps,
                                                 op->p.bn.momentum, splits, op->workspace));
        return BRG_OK;
    case BRG_OP_BATCHNORM_FORWARD_INFER:
        BRG_CUDA_CHECK(brg_cuda_bn_forward_infer(e->stream, fdata(x), fdata(opt_in(op, 1)), fdata(opt_in(op, 2)),
                                                 fdata(op->in[3]), fdata(op->in[4]), fdata(opt_in(op, 5)),
                                                 fdata(op->out[0]), n, c, plane, eps));
        return BRG_OK;
    case BRG_OP_BATCHNORM_STATS:
        BRG_CUDA_CHECK(brg_cuda_bn_stats(e->stream, fdata(x), fdata(op->out[0]), fdata(op->out[1]),
                                         fdata(opt_out(op, 2)), n, c, plane));
        return BRG_OK;
    case BRG_OP_BATCHNORM_BACKWARD_REDUCE:
        BRG_CUDA_CHECK(brg_cuda_bn_backward_reduce(e->stream, fdata(x), fdata(op->in[1]), fdata(op->in[2]),
                                                   fdata(op->in[3]), fdata(opt_in(op, 4)), fdata(op->out[0]),
                                                   fdata(op->out[1]),
                                                   fdata(opt_out(op, 2)), fdata(opt_out(op, 3)), n, c, plane,
                                                   op->accumulate));
        return BRG_OK;
    case BRG_OP_BATCHNORM_BACKWARD_ELEMT:
        BRG_CUDA_CHECK(brg_cuda_bn_backward_elemt(e->stream, fdata(x), fdata(op->in[1]), fdata(opt_in(op, 2)),
                                                  fdata(op->in[3]), fdata(op->in[4]), fdata(op->in[5]),
                                                  fdata(op->in[6]), fdata(opt_in(op, 7)), fdata(op->out[0]), n, c,
                                                  plane, op->p.bn.count,
                                                  op->accumulate));
        return BRG_OK;
    default:
        BRG_CUDA_CHECK(brg_cuda_bn_backward(e->stream, fdata(x), fdata(op->in[1]), fdata(opt_in(op, 2)),
                                            fdata(op->in[3]), fdata(op->out[0]), fdata(opt_out(op, 1)),
                                            fdata(opt_out(op, 2)), n, c, plane, eps, op->accumulate, splits,
                                            op->workspace));
        return BRG_OK;
    }
}

/* Concat: sample b of part i is one block of C_i * H * W floats at offset
 * `at` within sample b of the whole (see backends/cpu/join.c). */
brg_status brg_cuda_op_concat(brg_device *dev, const brg_op *op)
{
    brg_cuda_exec *e = brg_cuda_exec_of(dev);
    const int forward = op->kind == BRG_OP_CONCAT_FORWARD;
    const brg_tensor *whole_t = forward ? op->out[0] : op->in[0];
    const int parts = forward ? op->n_in : op->n_out;
    const int64_t batch = whole_t->shape[0], plane = whole_t->shape[2] * whole_t->shape[3];
    const int64_t whole = whole_t->shape[1] * plane;
    float *base = fdata(whole_t);
    int64_t at = 0;
    for (int i = 0; i < parts; i++) {
        const brg_tensor *part = forward ? op->in[i] : op->out[i];
        const int64_t block = part->shape[1] * plane;
        if (forward)
            BRG_CUDA_CHECK(brg_cuda_copy_blocks(e->stream, base + at, whole, fdata(part), block, block, batch, 0));
        else
            BRG_CUDA_CHECK(
                brg_cuda_copy_blocks(e->stream, fdata(part), block, base + at, whole, block, batch, op->accumulate));
        at += block;
    }
    return BRG_OK;
}

/* Add backward: da = dy, db = dy (added when accumulating); an absent
 * output is a branch that needs no gradient. */
brg_status brg_cuda_op_add_backward(brg_device *dev, const brg_op *op)
{
    brg_cuda_exec *e = brg_cuda_exec_of(dev);
    const brg_tensor *dy = op->in[0];
    const int64_t n = brg_tensor_numel(dy);
    for (int i = 0; i < op->n_out && i < 2; i++) {
        const brg_tensor *d = op->out[i];
        if (!d) continue;
        if (op->accumulate)
            BRG_CUDA_CHECK(brg_cuda_copy_or_add(e->stream, fdata(d), fdata(dy), n, 1));
        else if (d->data != dy->data && n > 0)
            BRG_CUDA_CHECK(cudaMemcpyAsync(d->data, dy->data, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                                           e->stream));
    }
    return BRG_OK;
}

brg_status brg_cuda_op_softmax_xent(brg_device *dev, const brg_op *op)
{
    brg_cuda_exec *e = brg_cuda_exec_of(dev);
    const brg_tensor *z = op->in[0];
    const int64_t n = z->shape[0], k = z->shape[1], px = z->ndim == 4 ? z->shape[2] * z->shape[3] : 1;
    if (n * px > INT_MAX || k > INT_MAX)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: %lld rows of %lld classes exceed the CUDA kernels' range",
                         brg_op_kind_name(op->kind), (long long)(n * px), (long long)k);
    const int ignore = op->p.xent.ignore_label;
    if (op->kind == BRG_OP_SOFTMAX_XENT_BACKWARD) {
        BRG_CUDA_CHECK(brg_cuda_xent_backward(e->stream, fdata(z), op->in[1]->data, fdata(op->out[0]), n, k, px,
                                              op->p.xent.grad_scale, op->accumulate, ignore, e->flags,
                                              (int)op->kind));
        return BRG_OK;
    }
    const size_t need = brg_cuda_xent_workspace_bytes(z);
    BRG_CHECK(workspace_given(e, op, need));
    BRG_CUDA_CHECK(brg_cuda_xent_forward(e->stream, fdata(z), op->in[1]->data, fdata(op->out[0]), fdata(op->out[1]),
                                         n, k, px, ignore, op->workspace, e->flags, (int)op->kind));
    return BRG_OK;
}

brg_status brg_cuda_op_count_correct(brg_device *dev, const brg_op *op)
{
    brg_cuda_exec *e = brg_cuda_exec_of(dev);
    const brg_tensor *z = op->in[0];
    const int64_t n = z->shape[0], k = z->shape[1], px = z->ndim == 4 ? z->shape[2] * z->shape[3] : 1;
    if (!fits_int(k))
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: %lld classes exceed the CUDA kernel's range",
                         brg_op_kind_name(op->kind), (long long)k);
    BRG_CUDA_CHECK(brg_cuda_count_correct(e->stream, fdata(z), op->in[1]->data, op->out[0]->data, n, k, px,
                                          op->accumulate));
    return BRG_OK;
}

brg_status brg_cuda_op_check_finite(brg_device *dev, const brg_op *op)
{
    brg_cuda_exec *e = brg_cuda_exec_of(dev);
    BRG_CUDA_CHECK(brg_cuda_check_finite(e->stream, fdata(op->in[0]), brg_tensor_numel(op->in[0]), op->out[0]->data,
                                         op->p.finite.tag));
    return BRG_OK;
}

brg_status brg_cuda_op_adam_update(brg_device *dev, const brg_op *op)
{
    brg_cuda_exec *e = brg_cuda_exec_of(dev);
    const brg_optim_params *o = &op->p.optim;
    /* Bias corrections in double, exactly as backends/cpu/optim.c. */
    const double c1 = 1.0 - pow((double)o->beta1, (double)o->step);
    const double c2 = 1.0 - pow((double)o->beta2, (double)o->step);
    const float step = (float)((double)o->lr / c1);
    const float inv_sqrt_c2 = (float)(1.0 / sqrt(c2));
    BRG_CUDA_CHECK(brg_cuda_adam(e->stream, fdata(op->in[0]), fdata(op->out[0]), fdata(op->out[1]),
                                 fdata(op->out[2]), brg_tensor_numel(op->in[0]), o->beta1, o->beta2, o->epsilon,
                                 o->weight_decay, step, inv_sqrt_c2));
    return BRG_OK;
}


/* The elementwise, pooling, dropout, upsampling and SGD kinds: one launch
 * each on the device's compute stream (cuda-launch.h). */

brg_status brg_cuda_op_relu_forward(brg_device *dev, const brg_op *op)
{
    const brg_tensor *x = op->in[0];
    BRG_CUDA_CHECK(
        brg_cuda_relu_forward(brg_cuda_exec_of(dev)->stream, fdata(x), fdata(op->out[0]), brg_tensor_numel(x)));
    return BRG_OK;
}

brg_status brg_cuda_op_relu_backward(brg_device *dev, const brg_op *op)
{
    const brg_tensor *x = op->in[0];
    BRG_CUDA_CHECK(brg_cuda_relu_backward(brg_cuda_exec_of(dev)->stream, fdata(x), fdata(op->in[1]),
                                          fdata(op->out[0]), brg_tensor_numel(x), op->accumulate));
    return BRG_OK;
}

brg_status brg_cuda_op_maxpool_forward(brg_device *dev, const brg_op *op)
{
    brg_cuda_pool_geom g;
    BRG_CHECK(pool_geom(op, op->in[0], op->out[0], &g));
    BRG_CUDA_CHECK(brg_cuda_maxpool_forward(brg_cuda_exec_of(dev)->stream, &g, fdata(op->in[0]), fdata(op->out[0])));
    return BRG_OK;
}

brg_status brg_cuda_op_maxpool_backward(brg_device *dev, const brg_op *op)
{
    brg_cuda_pool_geom g;
    BRG_CHECK(pool_geom(op, op->out[0], op->in[2], &g));
    BRG_CUDA_CHECK(brg_cuda_maxpool_backward(brg_cuda_exec_of(dev)->stream, &g, fdata(op->in[0]), fdata(op->in[1]),
                                             fdata(op->in[2]), fdata(op->out[0]), op->accumulate));
    return BRG_OK;
}

brg_status brg_cuda_op_avgpool_forward(brg_device *dev, const brg_op *op)
{
    brg_cuda_pool_geom g;
    BRG_CHECK(pool_geom(op, op->in[0], op->out[0], &g));
    BRG_CUDA_CHECK(brg_cuda_avgpool_forward(brg_cuda_exec_of(dev)->stream, &g, fdata(op->in[0]), fdata(op->out[0])));
    return BRG_OK;
}

brg_status brg_cuda_op_avgpool_backward(brg_device *dev, const brg_op *op)
{
    brg_cuda_pool_geom g;
    BRG_CHECK(pool_geom(op, op->out[0], op->in[0], &g));
    BRG_CUDA_CHECK(brg_cuda_avgpool_backward(brg_cuda_exec_of(dev)->stream, &g, fdata(op->in[0]), fdata(op->out[0]),
                                             op->accumulate));
    return BRG_OK;
}

brg_status brg_cuda_op_global_avgpool_forward(brg_device *dev, const brg_op *op)
{
    const brg_tensor *x = op->in[0];
    BRG_CUDA_CHECK(brg_cuda_global_avgpool_forward(brg_cuda_exec_of(dev)->stream, fdata(x), fdata(op->out[0]),
                                                   x->shape[0] * x->shape[1], x->shape[2] * x->shape[3]));
    return BRG_OK;
}

brg_status brg_cuda_op_global_avgpool_backward(brg_device *dev, const brg_op *op)
{
    const brg_tensor *dx = op->out[0];
    BRG_CUDA_CHECK(brg_cuda_global_avgpool_backward(brg_cuda_exec_of(dev)->stream, fdata(op->in[0]), fdata(dx),
                                                    dx->shape[0] * dx->shape[1], dx->shape[2] * dx->shape[3],
                                                    op->accumulate));
    return BRG_OK;
}

brg_status brg_cuda_op_add_forward(brg_device *dev, const brg_op *op)
{
    const brg_tensor *a = op->in[0];
    BRG_CUDA_CHECK(brg_cuda_add(brg_cuda_exec_of(dev)->stream, fdata(a), fdata(op->in[1]), fdata(op->out[0]),
                                brg_tensor_numel(a)));
    return BRG_OK;
}

/* Forward and backward are the same mask (base/rng.h); only the backward
 * may accumulate. */
brg_status brg_cuda_op_dropout(brg_device *dev, const brg_op *op)
{
    const brg_dropout_params *d = &op->p.dropout;
    const brg_tensor *x = op->in[0];
    BRG_CUDA_CHECK(brg_cuda_dropout(brg_cuda_exec_of(dev)->stream, fdata(x), fdata(op->out[0]), brg_tensor_numel(x),
                                    d->seed, d->offset, d->rate, 1.0f / (1.0f - d->rate),
                                    op->kind == BRG_OP_DROPOUT_BACKWARD && op->accumulate));
    return BRG_OK;
}

brg_status brg_cuda_op_upsample_forward(brg_device *dev, const brg_op *op)
{
    const brg_tensor *x = op->in[0];
    BRG_CUDA_CHECK(brg_cuda_upsample_forward(brg_cuda_exec_of(dev)->stream, fdata(x), fdata(op->out[0]),
                                             x->shape[0] * x->shape[1], x->shape[2], x->shape[3],
                                             op->p.upsample.factor));
    return BRG_OK;
}

brg_status brg_cuda_op_upsample_backward(brg_device *dev, const brg_op *op)
{
    const brg_tensor *dx = op->out[0];
    BRG_CUDA_CHECK(brg_cuda_upsample_backward(brg_cuda_exec_of(dev)->stream, fdata(op->in[0]), fdata(dx),
                                              dx->shape[0] * dx->shape[1], dx->shape[2], dx->shape[3],
                                              op->p.upsample.factor, op->accumulate));
    return BRG_OK;
}

brg_status brg_cuda_op_sgd_update(brg_device *dev, const brg_op *op)
{
    const brg_tensor *w = op->in[0];
    BRG_CUDA_CHECK(brg_cuda_sgd(brg_cuda_exec_of(dev)->stream, fdata(w), fdata(op->out[0]), fdata(opt_out(op, 1)),
                                brg_tensor_numel(w), op->p.optim.lr, op->p.optim.momentum, op->p.optim.weight_decay));
    return BRG_OK;
}

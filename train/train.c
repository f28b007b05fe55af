/* The single-device trainer: one stage over every block of the model, fed
 * from host memory one micro-batch at a time through slot 0. */
#include <stdlib.h>
#include <string.h>

#include "brigade/train.h"
#include "train/stage.h"
#include "base/internal.h"

struct brg_trainer {
    const brg_model *model;
    brg_device *dev;
    brg_trainer_config cfg;
    brg_stage *stage;
    int64_t steps;
    int64_t sample_size; /* floats per input sample */
};

brg_trainer_config brg_trainer_config_init(void)
{
    brg_trainer_config c;
    memset(&c, 0, sizeof c);
    c.batch = 64;
    c.micro_batch = 0;
    c.lr = 1e-3f;
    c.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_ADAM);
    c.seed = 1;
    return c;
}

brg_status brg_trainer_create(const brg_model *model, brg_device *dev, const brg_trainer_config *config,
                              brg_trainer **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_trainer_create: out is NULL");
    *out = NULL;
    if (!model || !dev || !config)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_trainer_create: model, device and config must be given");
    if (config->batch < 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "batch size %d must be at least 1", config->batch);
    if (config->micro_batch < 0 || config->micro_batch > config->batch)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "micro-batch size %d must be in 1..%d (the batch size), or 0",
                         config->micro_batch, config->batch);
    if (!(config->lr > 0.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "learning rate %g must be positive", (double)config->lr);
    if (!brg_model_is_final(model))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is not finalized", brg_model_name(model));

    brg_trainer *t = brg_calloc(1, sizeof *t, "a trainer");
    if (!t) return BRG_ERR_HOST_MEMORY;
    t->model = model;
    t->dev = dev;
    t->cfg = *config;
    if (t->cfg.micro_batch == 0) t->cfg.micro_batch = t->cfg.batch;
    const brg_model_tensor *in = brg_model_get_tensor(model, brg_model_input(model));
    t->sample_size = in->c * in->h * in->w;

    brg_stage_config sc;
    memset(&sc, 0, sizeof sc);
    sc.index = 0;
    sc.first_block = 0;
    sc.last_block = brg_model_block_count(model) - 1;
    sc.max_batch = t->cfg.micro_batch;
    sc.slots = 1;
    sc.optimizer = config->optimizer;
    sc.seed = config->seed;
    sc.ignore_label = config->ignore_label;
    brg_status st = brg_stage_create(model, dev, &sc, &t->stage);
    if (st != BRG_OK) {
        free(t);
        return st;
    }
    *out = t;
    return BRG_OK;
}

void brg_trainer_destroy(brg_trainer *t)
{
    if (!t) return;
    brg_stage_destroy(t->stage);
    free(t);
}

brg_stage *brg_trainer_stage(brg_trainer *t) { return t->stage; }
int64_t brg_trainer_steps(const brg_trainer *t) { return t->steps; }
void brg_trainer_set_lr(brg_trainer *t, float lr) { t->cfg.lr = lr; }

/* Copy samples [first, first + n) into slot 0 and run it forward. */
static brg_status load_and_forward(brg_trainer *t, const float *images, const int32_t *labels, int64_t first, int n,
                                   const brg_pass *pass, brg_stage_result *res)
{
    brg_tensor x, y;
    BRG_CHECK(brg_stage_input(t->stage, 0, 0, n, &x));
    BRG_CHECK(brg_device_copy_in(t->dev, x.data, images + first * t->sample_size, brg_tensor_bytes(&x)));
    BRG_CHECK(brg_stage_labels(t->stage, 0, n, &y));
    BRG_CHECK(brg_device_copy_in(t->dev, y.data, labels + first * brg_stage_label_count(t->stage),
                                 brg_tensor_bytes(&y)));
    return brg_stage_forward(t->stage, 0, pass, res);
}

brg_status brg_trainer_step(brg_trainer *t, const float *images, const int32_t *labels, int n, float *loss,
                            int64_t *correct)
{
    if (!images || !labels || n < 1 || n > t->cfg.batch)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "trainer step: %d samples, expected 1..%d with images and labels",
                         n, t->cfg.batch);
    const int64_t step = t->steps + 1;
    const int64_t px = brg_stage_label_count(t->stage), counted = brg_stage_counted_labels(t->stage, labels, n);
    double loss_sum = 0.0;
    int64_t right = 0;
    brg_status ret = BRG_OK;
    for (int first = 0; first < n; first += t->cfg.micro_batch) {
        const int m = n - first < t->cfg.micro_batch ? n - first : t->cfg.micro_batch;
        const brg_pass pass = {BRG_PASS_TRAIN, step, first};
        brg_stage_result res = {0.0f, 0, 0, NULL};
        BRG_CHECK_GOTO(load_and_forward(t, images, labels, first, m, &pass, &res), ret, fail);
        BRG_CHECK_GOTO(brg_stage_backward(t->stage, 0, counted > 0 ? 1.0f / (float)counted : 0.0f), ret, fail);
        loss_sum += (double)res.loss * (double)brg_stage_counted_labels(t->stage, labels + first * px, m);
        right += res.correct;
    }
    BRG_CHECK_GOTO(brg_stage_step(t->stage, t->cfg.lr, step), ret, fail);
    t->steps = step;
    if (loss) *loss = counted > 0 ? (float)(loss_sum / (double)counted) : 0.0f;
    if (correct) *correct = right;
    return BRG_OK;
fail:
    brg_stage_discard(t->stage, 0);
    brg_stage_zero_grads(t->stage);
    return ret;
}

brg_status brg_trainer_evaluate(brg_trainer *t, const float *images, const int32_t *labels, int64_t n, double *loss,
                                double *accuracy)
{
    if (!images || !labels || n < 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "trainer evaluate: %lld samples, expected at least 1 with images "
                         "and labels", (long long)n);
    const int64_t px = brg_stage_label_count(t->stage);
    double loss_sum = 0.0;
    int64_t right = 0, counted = 0;
    const int chunk = t->cfg.micro_batch;
    for (int64_t first = 0; first < n; first += chunk) {
        const int m = n - first < chunk ? (int)(n - first) : chunk;
        const brg_pass pass = {BRG_PASS_EVAL, t->steps, 0};
        brg_stage_result res = {0.0f, 0, 0, NULL};
        brg_status st = load_and_forward(t, images, labels, first, m, &pass, &res);
        if (st != BRG_OK) {
            brg_stage_discard(t->stage, 0);
            return st;
        }
        const int64_t c = brg_stage_counted_labels(t->stage, labels + first * px, m);
        loss_sum += (double)res.loss * (double)c;
        right += res.correct;
        counted += c;
    }
    if (loss) *loss = counted > 0 ? loss_sum / (double)counted : 0.0;
    if (accuracy) *accuracy = counted > 0 ? (double)right / (double)counted : 0.0;
    return BRG_OK;
}

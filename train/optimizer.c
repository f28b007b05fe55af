/* The optimizers' settings: PyTorch's defaults, names and checks. */
#include <string.h>

#include "train/stage-impl.h"

/* ---- optimizers ---- */

brg_optimizer_config brg_optimizer_config_init(brg_optimizer_kind kind)
{
    brg_optimizer_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.beta1 = 0.9f;
    c.beta2 = 0.999f;
    c.epsilon = 1e-8f;
    return c;
}

const char *brg_optimizer_name(brg_optimizer_kind kind)
{
    switch (kind) {
    case BRG_OPTIMIZER_SGD: return "sgd";
    case BRG_OPTIMIZER_ADAM: return "adam";
    }
    return "unknown";
}

brg_status brg_optimizer_parse(const char *name, brg_optimizer_kind *kind)
{
    for (int k = BRG_OPTIMIZER_SGD; name && k <= BRG_OPTIMIZER_ADAM; k++)
        if (strcmp(name, brg_optimizer_name((brg_optimizer_kind)k)) == 0) {
            *kind = (brg_optimizer_kind)k;
            return BRG_OK;
        }
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown optimizer '%.100s' (expected sgd or adam)",
                     name ? name : "(null)");
}

int brg_optimizer_state_count(const brg_optimizer_config *c)
{
    if (c->kind == BRG_OPTIMIZER_ADAM) return 2;
    return c->momentum > 0.0f ? 1 : 0;
}

brg_status brg_optimizer_check(const brg_optimizer_config *c)
{
    if (c->kind != BRG_OPTIMIZER_SGD && c->kind != BRG_OPTIMIZER_ADAM)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown optimizer kind %d (known: sgd, adam)", (int)c->kind);
    if (!(c->weight_decay >= 0.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "weight decay %g must be non-negative", (double)c->weight_decay);
    if (c->kind == BRG_OPTIMIZER_SGD && !(c->momentum >= 0.0f && c->momentum < 1.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "SGD momentum %g must be in [0, 1)", (double)c->momentum);
    if (c->kind == BRG_OPTIMIZER_ADAM &&
        (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f) || !(c->epsilon > 0.0f)))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "Adam betas (%g, %g) must be in [0, 1) and epsilon %g positive",
                         (double)c->beta1, (double)c->beta2, (double)c->epsilon);
    return BRG_OK;
}


/* The planner's options: the names of recomputation modes, the defaults,
 * and the checks brg_plan_create makes before it plans anything, each
 * failing with a message that says what to give instead. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "brigade/arena.h"
#include "plan-impl.h"

#define MAX_BATCH (1 << 24)

static const char *const recompute_names[] = {"none", "all", "auto"};

const char *brg_recompute_name(brg_recompute mode)
{
    if ((int)mode < 0 || (int)mode > 2) return "unknown";
    return recompute_names[mode];
}

brg_status brg_recompute_parse(const char *name, brg_recompute *mode)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, recompute_names[i]) == 0) {
            *mode = (brg_recompute)i;
            return BRG_OK;
        }
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown recomputation '%.100s' (expected none, all or auto)",
                     name ? name : "(null)");
}

int brg_plan_chunks_of(brg_schedule_kind kind, int chunks)
{
    return brg_schedule_kind_chunks(kind, kind == BRG_SCHEDULE_INTERLEAVED ? chunks : 0);
}

brg_plan_options brg_plan_options_init(void)
{
    brg_plan_options o;
    memset(&o, 0, sizeof o);
    o.schedule = BRG_SCHEDULE_1F1B;
    o.recompute = BRG_RECOMPUTE_NONE;
    o.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    o.optimizer.momentum = 0.9f;
    o.headroom = 0.05;
    o.device_flops = 10e12;
    o.link_bytes_per_s = 10e9;
    o.search = BRG_PLAN_SEARCH_DP;
    o.explain = 1;
    o.verify = 1;
    return o;
}

brg_status brg_plan_check_options(const brg_model *model, const brg_plan_options *o)
{
    if (!brg_model_is_final(model))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is not finalized", brg_model_name(model));
    const int nb = brg_model_block_count(model);
    if (!o->devices || o->n_devices < 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "a plan needs at least one device");
    if (o->n_devices > BRG_PLAN_MAX_DEVICES)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%d devices: a plan takes at most %d", o->n_devices,
                         BRG_PLAN_MAX_DEVICES);
    for (int d = 0; d < o->n_devices; d++)
        if (o->devices[d].capacity < BRG_ARENA_ALIGN)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "device %d has a capacity of %zu bytes, less than %zu", d,
                             o->devices[d].capacity, BRG_ARENA_ALIGN);
    if (o->batch < 1 || o->batch > MAX_BATCH)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "the batch %d must be between 1 and %d", o->batch, MAX_BATCH);
    if (o->micro_batches < 0 || o->micro_batches > o->batch || (o->micro_batches && o->batch % o->micro_batches)) {
        char divisors[256] = "";
        size_t len = 0;
        int shown = 0;
        for (int m = 1; m <= o->batch && len + 16 < sizeof divisors; m++) {
            if (o->batch % m) continue;
            len += (size_t)snprintf(divisors + len, sizeof divisors - len, "%s%d", shown ? ", " : "", m);
            shown++;
        }
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "%d micro-batches do not divide the batch of %d into equal micro-batches; divisors: %s",
                         o->micro_batches, o->batch, divisors);
    }
    if ((int)o->schedule < 0 || o->schedule >= BRG_SCHEDULE_KIND_COUNT)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown schedule kind %d", (int)o->schedule);
    const int interleaved = o->schedule == BRG_SCHEDULE_INTERLEAVED || o->schedule_auto;
    if (!interleaved && o->chunks > 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "%d chunks per device: chunks apply to the interleaved schedule only", o->chunks);
    if (o->chunks < 0 || (o->chunks == 1 && interleaved) || o->chunks > BRG_PROGRAM_MAX_CHUNKS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%d chunks per device: the interleaved schedule takes 2 to %d",
                         o->chunks, BRG_PROGRAM_MAX_CHUNKS);
    const int v = o->schedule_auto ? 1 : brg_plan_chunks_of(o->schedule, o->chunks);
    if (v > 1 && o->n_devices == 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "the %s schedule needs at least 2 devices: on one device there is no bubble for its chunks "
                         "to shrink (use 1f1b or gpipe)",
                         brg_schedule_kind_name(o->schedule));
    if (o->n_devices * v > nb) {
        /* Only what the checks above let through: several chunks need 2
         * devices, and interleaved 2 chunks. */
        char fix[96] = "use 1f1b or gpipe";
        const int max_p = nb / v, max_v = nb / o->n_devices;
        if (v == 1 || max_p >= 2) snprintf(fix, sizeof fix, "use at most %d devices", max_p);
        if (o->schedule == BRG_SCHEDULE_INTERLEAVED && max_v >= 2) {
            const size_t len = max_p >= 2 ? strlen(fix) : 0;
            snprintf(fix + len, sizeof fix - len, "%s at most %d chunks", len ? ", or" : "use", max_v);
        }
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "model '%s' has %d blocks, too few for %d devices%s: every stage needs a block; %s",
                         brg_model_name(model), nb, o->n_devices, v > 1 ? " with their chunks" : "", fix);
    }
    if ((int)o->recompute < 0 || (int)o->recompute > 2)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown recomputation mode %d", (int)o->recompute);
    if (o->replicas < 0 || o->replicas > 4096)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%d replicas: give 1 .. 4096 (0 for none)", o->replicas);
    if (!(o->headroom >= 0.0 && o->headroom <= 0.9))
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "headroom %g must be between 0 and 0.9 (a fraction of each capacity)", o->headroom);
    if (!(o->device_flops > 0.0) || !isfinite(o->device_flops))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "the device speed %g FLOP/s must be positive", o->device_flops);
    if (!(o->link_bytes_per_s >= 0.0) || !isfinite(o->link_bytes_per_s))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "the link speed %g bytes/s must be 0 (free) or positive",
                         o->link_bytes_per_s);
    const brg_optimizer_config *oc = &o->optimizer;
    if (oc->kind != BRG_OPTIMIZER_SGD && oc->kind != BRG_OPTIMIZER_ADAM)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown optimizer kind %d", (int)oc->kind);
    if (oc->kind == BRG_OPTIMIZER_SGD && !(oc->momentum >= 0.0f && oc->momentum < 1.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "SGD momentum %g must be in [0, 1)", (double)oc->momentum);
    if (o->search != BRG_PLAN_SEARCH_DP && o->search != BRG_PLAN_SEARCH_EXHAUSTIVE)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown search method %d", (int)o->search);
    if (o->split) {
        if (o->schedule_auto)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "manual cuts need a fixed schedule: the automatic search may change the number of stages");
        const int V = o->n_devices * v;
        if (o->n_split != V - 1) {
            /* What to change: the names, or (one chunk per device) the devices. */
            char fix[160];
            if (V == 1) snprintf(fix, sizeof fix, "one stage takes no cuts: drop them, or give %d devices",
                                 o->n_split + 1);
            else if (v == 1) snprintf(fix, sizeof fix, "%d stages take %d (each named block ends a stage but the "
                                      "last): name %d, or give %d devices", V, V - 1, V - 1, o->n_split + 1);
            else snprintf(fix, sizeof fix, "%d stages take %d (each named block ends a stage but the last): name %d",
                          V, V - 1, V - 1);
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "%d cut%s for %d stage%s: %s", o->n_split,
                             o->n_split == 1 ? "" : "s", V, V == 1 ? "" : "s", fix);
        }
        for (int k = 0; k < o->n_split; k++) {
            if (o->split[k] < 0 || o->split[k] >= nb - 1)
                return brg_error(BRG_ERR_INVALID_ARGUMENT,
                                 "cut %d after block %d: cuts go after blocks 0..%d (not after the last block)", k + 1,
                                 o->split[k], nb - 2);
            if (k > 0 && o->split[k] <= o->split[k - 1])
                return brg_error(BRG_ERR_INVALID_ARGUMENT,
                                 "cut %d after block '%s' does not come after cut %d after block '%s': cuts must be "
                                 "in model order, each stage at least one block",
                                 k + 1, brg_model_block_name(model, o->split[k]), k,
                                 brg_model_block_name(model, o->split[k - 1]));
        }
    }
    return BRG_OK;
}


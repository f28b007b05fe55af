/* A plan's JSON form (brg_plan_to_json, what 'brigade plan --json'
 * prints), written from the plan's public accessors. */
#include <jansson.h>
#include <stdlib.h>

#include "plan-impl.h"

static int set_new(json_t *obj, const char *key, json_t *value)
{
    return value ? json_object_set_new(obj, key, value) : -1;
}

static json_t *json_size(size_t v) { return json_integer((json_int_t)v); }

static json_t *block_name(const brg_model *m, int b)
{
    return b >= 0 ? json_string(brg_model_block_name(m, b)) : json_null();
}

static json_t *stage_json(const brg_plan *plan, const brg_plan_stage *st)
{
    const brg_model *m = brg_plan_model(plan);
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = 0;
    bad |= set_new(o, "device", json_integer(st->device));
    bad |= set_new(o, "backend", json_string(brg_backend_name(st->spec.backend)));
    bad |= set_new(o, "capacity_bytes", json_size(st->capacity_bytes));
    if (st->spec.card) bad |= set_new(o, "card_bytes", json_size(st->spec.card)); /* cuda:G@CARD */
    bad |= set_new(o, "budget_bytes", json_size(st->budget_bytes));
    bad |= set_new(o, "first_block", block_name(m, st->part.first_block[0]));
    bad |= set_new(o, "last_block", block_name(m, st->part.last_block[st->part.chunks - 1]));
    json_t *chunks = json_array();
    for (int c = 0; chunks && c < st->part.chunks; c++) {
        json_t *ch = json_object();
        if (!ch) {
            bad = 1;
            break;
        }
        bad |= set_new(ch, "first_block", block_name(m, st->part.first_block[c]));
        bad |= set_new(ch, "last_block", block_name(m, st->part.last_block[c]));
        bad |= set_new(ch, "recompute", json_boolean(st->part.recompute[c]));
        bad |= set_new(ch, "stash_bytes", json_size(st->chunk_stash_bytes[c]));
        bad |= set_new(ch, "in_flight", json_integer(st->chunk_in_flight[c]));
        bad |= json_array_append_new(chunks, ch);
    }
    bad |= set_new(o, "chunks", chunks);
    bad |= set_new(o, "params", json_integer(st->params));
    bad |= set_new(o, "param_bytes", json_size(st->param_bytes));
    bad |= set_new(o, "grad_bytes", json_size(st->grad_bytes));
    bad |= set_new(o, "optimizer_bytes", json_size(st->optimizer_bytes));
    bad |= set_new(o, "receive_bytes", json_size(st->receive_bytes));
    bad |= set_new(o, "stash_bytes", json_size(st->stash_bytes));
    bad |= set_new(o, "in_flight", json_integer(st->in_flight));
    bad |= set_new(o, "activation_bytes", json_size(st->activation_bytes));
    bad |= set_new(o, "peak_bytes", json_size(st->peak_bytes));
    bad |= set_new(o, "arena_bytes", json_size(st->arena_bytes));
    bad |= set_new(o, "estimate_bytes", json_size(st->estimate_bytes));
    bad |= set_new(o, "verified", json_boolean(st->verified));
    bad |= set_new(o, "fits", json_boolean(st->fits));
    bad |= set_new(o, "flops", json_real(st->flops));
    bad |= set_new(o, "time_s", json_real(st->time_s));
    bad |= set_new(o, "idle", json_real(st->idle));
    bad |= set_new(o, "send_bytes", json_size(st->send_bytes));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

brg_status brg_plan_to_json(const brg_plan *plan, char **text)
{
    if (!text) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_plan_to_json: text is NULL");
    *text = NULL;
    if (!plan) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_plan_to_json: plan is NULL");
    const brg_plan_info *in = brg_plan_get_info(plan);
    json_t *o = json_object();
    if (!o) return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate host memory for the plan's JSON");
    int bad = 0;
    bad |= set_new(o, "model", json_string(brg_model_name(brg_plan_model(plan))));
    bad |= set_new(o, "feasible", json_boolean(in->feasible));
    bad |= set_new(o, "manual", json_boolean(in->manual));
    bad |= set_new(o, "schedule", json_string(brg_schedule_kind_name(in->schedule)));
    bad |= set_new(o, "chunks", json_integer(in->chunks));
    bad |= set_new(o, "microbatches", json_integer(in->micro_batches));
    bad |= set_new(o, "micro_batch", json_integer(in->micro_batch));
    bad |= set_new(o, "batch", json_integer(in->batch));
    bad |= set_new(o, "devices", json_integer(in->devices));
    bad |= set_new(o, "blocks", json_integer(in->blocks));
    bad |= set_new(o, "recompute", json_string(brg_recompute_name(in->recompute)));
    bad |= set_new(o, "headroom", json_real(in->headroom));
    bad |= set_new(o, "device_flops", json_real(in->device_flops));
    bad |= set_new(o, "link_bytes_per_s", json_real(in->link_bytes_per_s));
    bad |= set_new(o, "profile", in->profile ? json_string(in->profile) : json_null());
    static const char *const times[] = {"flops", "profile", "measured", "calibrated"};
    bad |= set_new(o, "times", json_string(times[in->times]));
    bad |= set_new(o, "cpu_speed_cache", in->cpu_speed_cache ? json_string(in->cpu_speed_cache) : json_null());
    bad |= set_new(o, "bottleneck_s", json_real(in->bottleneck_s));
    bad |= set_new(o, "step_s", json_real(in->step_s));
    bad |= set_new(o, "replicas", json_integer(in->replicas));
    bad |= set_new(o, "sync_batchnorm", json_boolean(in->sync_batchnorm));
    bad |= set_new(o, "allreduce_s", json_real(in->allreduce_s));
    bad |= set_new(o, "bubble", json_real(in->bubble));
    bad |= set_new(o, "samples_per_s", json_real(in->samples_per_s));
    bad |= set_new(o, "searches", json_integer(in->searches));
    bad |= set_new(o, "note", json_string(in->note ? in->note : ""));
    json_t *stages = json_array();
    for (int d = 0; stages && in->partitioned && d < in->devices; d++)
        bad |= json_array_append_new(stages, stage_json(plan, brg_plan_get_stage(plan, d)));
    bad |= set_new(o, "stages", stages);
    if (!in->feasible && !in->manual) {
        json_t *e = json_object();
        if (e) {
            bad |= set_new(e, "culprit_block", block_name(brg_plan_model(plan), in->culprit_block));
            bad |= set_new(e, "culprit_bytes", json_size(in->culprit_bytes));
            bad |= set_new(e, "culprit_budget_bytes", json_size(in->culprit_budget));
            bad |= set_new(e, "culprit_device",
                           in->culprit_block >= 0 ? json_integer(in->culprit_device) : json_null());
            bad |= set_new(e, "fewest_devices", json_integer(in->fewest_devices));
            bad |= set_new(e, "largest_batch", json_integer(in->largest_batch));
            bad |= set_new(e, "largest_batch_microbatches", json_integer(in->largest_batch_micro_batches));
        }
        bad |= set_new(o, "explain", e);
    }
    char *s = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    json_decref(o);
    if (!s) return brg_error(BRG_ERR_HOST_MEMORY, "cannot make the plan's JSON text");
    *text = s;
    return BRG_OK;
}

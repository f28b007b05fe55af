/* Building a schedule (brg_schedule_build, brg_schedule_build_timed): the
 * classic kinds' lists come from schedule.c's emitters; the memory-capped
 * kinds (zb-h2 and the V-shapes) take each of vshape.c's orders, framed by
 * the same emitters, and keep the shortest that qualifies, which is what
 * needs the verifier and the simulator here, above them. */
#include <stdio.h>
#include <stdlib.h>

#include "brigade/schedule.h"
#include "base/internal.h"
#include "schedule/schedule-impl.h"

/* The makespan of s at `times`, or a negative value when it does not
 * qualify as a schedule of its kind: a device holds more than the cap,
 * or it deadlocks with one-message channels. */
static double capped_score(const brg_schedule *s, int cap, const brg_schedule_times *times)
{
    for (int d = 0; d < s->p; d++)
        if (brg_schedule_max_in_flight(s, d, -1) > cap) return -1.0;
    char why[256];
    if (brg_schedule_verify(s, 1, why, sizeof why) != BRG_OK) return -1.0;
    brg_schedule_sim *sim = NULL;
    if (brg_schedule_simulate(s, times, &sim) != BRG_OK) return -1.0;
    const double makespan = sim->makespan;
    brg_schedule_sim_destroy(sim);
    return makespan;
}

/* A V-shape or ZB-H2 (v chunks): every construction that applies
 * (vshape.c), keeping the shortest at `times` (NULL: unit costs) that
 * qualifies. */
static brg_status build_capped_best(brg_schedule_kind kind, int p, int m, int v, const brg_schedule_times *times,
                                    brg_schedule **out)
{
    const int V = v * p, cap = brg_vshape_cap(kind, p);
    brg_action *order = brg_malloc((size_t)p * 3 * (size_t)v * (size_t)m * sizeof *order, "a schedule's order");
    double *unit = brg_malloc((size_t)V * sizeof *unit, "unit costs");
    if (!order || !unit) {
        free(order);
        free(unit);
        return BRG_ERR_HOST_MEMORY;
    }
    for (int j = 0; j < V; j++) unit[j] = 1.0;
    const brg_schedule_times unit_times = {.forward = unit, .backward_input = unit, .backward_weight = unit};
    if (!times) times = &unit_times;
    brg_schedule *best = NULL;
    double best_makespan = 0.0;
    brg_status ret = BRG_OK;
    /* The constructions at unit costs, then the list schedule at the
     * times given: a list built for real times can need longer channels
     * (it is then left out), and one at unit costs always qualifies. */
    const int timed = times != &unit_times;
    for (int c = 0; c < BRG_VSHAPE_CONSTRUCTIONS + 2 * timed && ret == BRG_OK; c++) {
        brg_schedule *s = NULL;
        ret = c < BRG_VSHAPE_CONSTRUCTIONS ? brg_vshape_order(kind, c, p, m, NULL, order)
                                           : brg_vshape_order(kind, c - 2, p, m, times, order); /* 1, 2 */
        if (ret == BRG_ERR_UNSUPPORTED || ret == BRG_ERR_INTERNAL) {
            /* not for this kind, or stalled: it does not qualify (and one
             * at unit costs with one-message channels always does) */
            if (ret == BRG_ERR_INTERNAL) brg_clear_error();
            ret = BRG_OK;
            continue;
        }
        if (ret == BRG_OK) ret = brg_schedule_emit(kind, p, m, v, order, &s);
        if (ret != BRG_OK) break;
        const double makespan = capped_score(s, cap, times);
        if (makespan >= 0.0 && (!best || makespan < best_makespan)) {
            brg_schedule_destroy(best);
            best = s;
            best_makespan = makespan;
        } else {
            brg_schedule_destroy(s);
        }
    }
    free(order);
    free(unit);
    if (ret == BRG_OK && !best)
        ret = brg_error(BRG_ERR_INTERNAL, "%s schedule (%d devices, %d micro-batches): no construction stays within "
                        "%d chunk micro-batches per device and runs with one-message channels",
                        brg_schedule_kind_name(kind), p, m, cap);
    if (ret != BRG_OK) {
        brg_schedule_destroy(best);
        return ret;
    }
    brg_clear_error();
    *out = best;
    return BRG_OK;
}

brg_status brg_schedule_build(brg_schedule_kind kind, int devices, int micro_batches, int chunks, brg_schedule **out)
{
    return brg_schedule_build_timed(kind, devices, micro_batches, chunks, NULL, out);
}

brg_status brg_schedule_build_timed(brg_schedule_kind kind, int devices, int micro_batches, int chunks,
                                    const brg_schedule_times *times, brg_schedule **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_build: NULL out");
    *out = NULL;
    if ((int)kind < 0 || (int)kind >= BRG_SCHEDULE_KIND_COUNT)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_build: cannot build schedule kind %d (%s)", (int)kind,
                         brg_schedule_kind_name(kind));
    char what[64];
    snprintf(what, sizeof what, "%s schedule", brg_schedule_kind_name(kind));
    BRG_CHECK(brg_schedule_check_shape(what, devices, micro_batches, chunks));
    if (kind == BRG_SCHEDULE_INTERLEAVED && chunks < 2)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "interleaved schedule: needs at least 2 chunks per device, not %d (use 1f1b for one)", chunks);
    if (brg_schedule_kind_is_v(kind)) {
        if (chunks != 2)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: takes 2 chunks per device (the V), not %d", what, chunks);
        if (times) BRG_CHECK(brg_schedule_check_times(times, devices * 2, what));
        return build_capped_best(kind, devices, micro_batches, 2, times, out);
    }
    if (kind != BRG_SCHEDULE_INTERLEAVED && chunks != 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "%s: takes 1 chunk per device, not %d (only interleaved and the V-shapes have several)",
                         what, chunks);
    if (kind == BRG_SCHEDULE_ZB_H2) {
        if (times) BRG_CHECK(brg_schedule_check_times(times, devices, what));
        return build_capped_best(kind, devices, micro_batches, 1, times, out);
    }
    return brg_schedule_emit(kind, devices, micro_batches, chunks, NULL, out);
}


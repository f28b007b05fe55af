/* Faults inside a pipeline step: for every device, the N-th arena
 * allocation, the N-th device copy and the N-th kernel launch of one step
 * fail, for every N a step has. Each time the step fails with a named
 * error (the device, "injected fault"), every worker stops, every device
 * is back to what it holds between steps (nothing leaks in the arenas; the
 * sanitizer build checks the host), and the next step runs clean.
 *
 * With BRG_TEST_CPU=async the devices are asynchronous CPU devices (see
 * pipeline_test.h), so the same faults land in queued work. */
#include "base/device-impl.h"
#include "pipeline_test.h"

#define P 3
#define MBS 3
#define BATCH 6
#define LR 0.01f

enum { FAULT_ALLOC, FAULT_COPY, FAULT_RUN, FAULT_KINDS };
static const char *const kind_names[FAULT_KINDS] = {"allocation", "copy", "kernel launch"};

static uint64_t count_of(const brg_device *dev, int kind)
{
    uint64_t c[FAULT_KINDS];
    brg_device_counts(dev, &c[FAULT_ALLOC], &c[FAULT_COPY], &c[FAULT_RUN]);
    return c[kind];
}

static void arm(brg_device *dev, int kind, int64_t n)
{
    brg_device_set_fault(dev, kind == FAULT_ALLOC ? n : 0, kind == FAULT_COPY ? n : 0, kind == FAULT_RUN ? n : 0);
}

/* Every device holds exactly what it holds between steps. */
static int at_rest(brg_pipeline *pl, brg_device *const *devs, const char *what)
{
    int ok = 1;
    for (int d = 0; d < P; d++) {
        brg_memory_report rep;
        if (brg_pipeline_memory(pl, d, &rep) != BRG_OK) return 0;
        const size_t used = brg_device_in_use(devs[d]);
        CHECK_MSG(used == rep.persistent_bytes, "%s: device %d holds %zu bytes, %zu between steps", what, d, used,
                  rep.persistent_bytes);
        ok &= used == rep.persistent_bytes;
    }
    return ok;
}

int main(void)
{
    brg_model *m = skip_model();
    float *images = NULL;
    int32_t *labels = NULL;
    brg_device_spec specs[P];
    brg_device *devs[P] = {NULL};
    brg_plan *plan = NULL;
    brg_pipeline *pl = NULL;
    if (!m || !new_data(m, BATCH, &images, &labels)) goto done;
    for (int d = 0; d < P; d++) specs[d] = cpu_spec(64 * MiB);
    brg_plan_options o = plan_options(specs, P, BATCH, MBS, BRG_SCHEDULE_1F1B, 1, NULL);
    o.explain = 0;
    CHECK_OK(brg_plan_create(m, &o, &plan));
    if (!plan || !brg_plan_get_info(plan)->feasible) goto done;
    for (int d = 0; d < P; d++) {
        CHECK_OK(test_device_create(&specs[d], d, &devs[d]));
        if (!devs[d]) goto done;
    }
    CHECK_OK(pipeline_from_plan(plan, devs, P, NULL, &pl));
    if (!pl) goto done;
    CHECK_OK(brg_pipeline_step(pl, LR, images, labels, BATCH, NULL, NULL));
    int faults = 0;
    for (int d = 0; d < P; d++)
        for (int kind = 0; kind < FAULT_KINDS; kind++) {
            /* How many of this kind one step does on device d. */
            const uint64_t before = count_of(devs[d], kind);
            CHECK_OK(brg_pipeline_step(pl, LR, images, labels, BATCH, NULL, NULL));
            const uint64_t per_step = count_of(devs[d], kind) - before;
            CHECK_MSG(per_step > 0, "device %d does no %s in a step", d, kind_names[kind]);
            for (uint64_t n = 1; n <= per_step; n++) {
                char what[96];
                snprintf(what, sizeof what, "device %d, %s %llu of %llu", d, kind_names[kind], (unsigned long long)n,
                         (unsigned long long)per_step);
                arm(devs[d], kind, (int64_t)n);
                const brg_status st = brg_pipeline_step(pl, LR, images, labels, BATCH, NULL, NULL);
                arm(devs[d], kind, 0);
                const brg_status want = kind == FAULT_ALLOC ? BRG_ERR_OUT_OF_MEMORY : BRG_ERR_BACKEND;
                CHECK_MSG(st == want, "%s: status %s, wanted %s (%s)", what, brg_status_string(st),
                          brg_status_string(want), brg_last_error());
                char device[32];
                snprintf(device, sizeof device, "device '%s'", brg_device_name(devs[d]));
                CHECK_MSG(strstr(brg_last_error(), "injected fault") && strstr(brg_last_error(), device),
                          "%s: the message does not name the fault and the device: %s", what, brg_last_error());
                if (!at_rest(pl, devs, what)) goto done;
                const brg_status next = brg_pipeline_step(pl, LR, images, labels, BATCH, NULL, NULL);
                CHECK_MSG(next == BRG_OK, "%s: the next step failed: %s", what, brg_last_error());
                if (next != BRG_OK || !at_rest(pl, devs, what)) goto done;
                faults++;
            }
        }
    fprintf(stderr, "%d faults injected, each a named error with the next step clean\n", faults);
done:
    brg_pipeline_destroy(pl);
    for (int d = 0; d < P; d++) brg_device_destroy(devs[d]);
    brg_plan_destroy(plan);
    free(images);
    free(labels);
    brg_model_destroy(m);
    TEST_EXIT();
}

/* Dry runs: a device's real program (exec/program.c) run on a planning
 * device of the target's capacity and workspace sizes, so that the peak it
 * reports is the training peak by construction (brigade/program.h). */
#include <string.h>

#include "base/internal.h"
#include "exec/program-impl.h"

brg_status brg_program_dry_run(const brg_model *model, const brg_schedule *schedule, int device,
                               const brg_device_part *part, int micro_batch, const brg_optimizer_config *optimizer,
                               const brg_device_spec *target, brg_memory_report *report)
{
    if (!report) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_program_dry_run: report is NULL");
    memset(report, 0, sizeof *report);
    if (!model || !schedule || !part || !optimizer || !target)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_program_dry_run: model, schedule, part, optimizer and target must be given");
    brg_device *dev = NULL;
    brg_program *g = NULL;
    brg_status ret = BRG_OK;
    BRG_CHECK_GOTO(brg_device_create_planning(target, device, &dev), ret, fail);
    BRG_CHECK_GOTO(brg_program_create(model, schedule, device, part, micro_batch, optimizer, 0, 0, dev, &g), ret, fail);
    BRG_CHECK_GOTO(brg_program_begin(g, 1), ret, fail);
    const int count = brg_schedule_action_count(schedule, device);
    for (int i = 0; i < count; i++)
        BRG_CHECK_GOTO(brg_program_run_action(g, brg_schedule_action(schedule, device, i), NULL), ret, fail);
    BRG_CHECK_GOTO(brg_program_finish(g), ret, fail);
    /* The update allocates nothing today; running it keeps the dry run
     * honest if it ever does. */
    BRG_CHECK_GOTO(brg_program_step(g, 0.0f, 1), ret, fail);
    size_t persistent = 0;
    brg_program_persistent(g, &persistent, NULL, NULL, NULL);
    if (brg_device_in_use(dev) != persistent) {
        ret = brg_error(BRG_ERR_INTERNAL, "device %d holds %zu bytes after the mini-batch, but its stages' persistent "
                        "memory is %zu bytes", device, brg_device_in_use(dev), persistent);
        goto fail;
    }
exit:
    if (dev) report->peak_bytes = brg_device_peak(dev);
    if (g) {
        brg_program_persistent(g, &report->persistent_bytes, &report->param_bytes, &report->grad_bytes,
                               &report->optimizer_bytes);
        report->receive_bytes = brg_program_receive_bytes(g);
    }
    report->activation_peak_bytes =
        report->peak_bytes > report->persistent_bytes ? report->peak_bytes - report->persistent_bytes : 0;
    report->max_in_flight = brg_schedule_max_in_flight(schedule, device, -1);
    if (report->max_in_flight < 0) report->max_in_flight = 0;
    brg_program_destroy(g);
    brg_device_destroy(dev);
    return ret;
fail:
    goto exit;
}

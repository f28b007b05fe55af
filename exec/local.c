/* The single-threaded driver of all devices' programs (program-impl.h,
 * brg_program_run_local): the devices take turns as the schedule walk
 * says, messages go through the same channels as the executor's. */
#include "base/internal.h"
#include "program-impl.h"
#include "schedule/walk.h"
#include "transfer.h"


typedef struct local_run {
    int p;
    brg_channel **channels; /* [grad][src][dst], NULL where nothing flows */
    brg_program *const *programs;
    const brg_program_io *io;
} local_run;

static brg_status local_send(void *ctx, brg_program *g, const brg_action *a, brg_tensor *t, int count)
{
    local_run *r = ctx;
    int boundary = 0;
    brg_channel *ch = brg_transfer_channel(r->channels, r->p, g, a, &boundary);
    if (!ch) return brg_error(BRG_ERR_INTERNAL, "a send across no boundary");
    BRG_CHECK(brg_channel_write(ch, brg_channel_reserve(ch), t, count, a->micro_batch, boundary, NULL, NULL));
    brg_channel_push(ch);
    return BRG_OK;
}

static brg_status local_recv(void *ctx, brg_program *g, const brg_action *a, brg_tensor *t, int count)
{
    local_run *r = ctx;
    int boundary = 0;
    brg_channel *ch = brg_transfer_channel(r->channels, r->p, g, a, &boundary);
    if (!ch) return brg_error(BRG_ERR_INTERNAL, "a receive across no boundary");
    BRG_CHECK(brg_channel_read(ch, brg_channel_peek(ch), t, count, a->micro_batch, boundary));
    brg_channel_pop(ch);
    return BRG_OK;
}

/* The walk's step: device d's program runs its action. */
static brg_status local_step(void *ctx, int d, int i, const brg_action *a)
{
    (void)i;
    local_run *r = ctx;
    return brg_program_run_action(r->programs[d], a, r->io);
}

brg_status brg_program_run_local(brg_program *const *programs, int p, int64_t step, const float *images,
                                 const int32_t *labels)
{
    if (!programs || p < 1 || !programs[0] || !images || !labels)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_program_run_local: programs, images and labels must be given");
    const brg_schedule *s = brg_program_schedule(programs[0]);
    if (brg_schedule_devices(s) != p)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_program_run_local: %d programs for a schedule of %d devices",
                         p, brg_schedule_devices(s));
    for (int d = 0; d < p; d++)
        if (!programs[d] || brg_program_schedule(programs[d]) != s || brg_program_device_index(programs[d]) != d ||
            brg_program_micro_batch(programs[d]) != brg_program_micro_batch(programs[0]) ||
            brg_program_capacity(programs[d]) != brg_program_capacity(programs[0]))
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "brg_program_run_local: program %d is not device %d of the same schedule, micro-batch "
                             "size and channel capacity", d, d);
    local_run r = {.p = p, .programs = programs};
    BRG_CHECK(brg_transfer_channels_create(NULL, programs, p, &r.channels));
    const brg_program_io io = {.ctx = &r,
                               .recv_act = local_recv,
                               .send_act = local_send,
                               .recv_grad = local_recv,
                               .send_grad = local_send,
                               .images = images,
                               .labels = labels};
    r.io = &io;
    brg_status ret = BRG_OK;
    for (int d = 0; d < p; d++) BRG_CHECK_GOTO(brg_program_begin(programs[d], step), ret, exit);
    /* The walk keeps every channel within the receive buffers' capacity;
     * a walk that stops is a schedule that cannot finish with it. */
    char stuck[512];
    ret = brg_schedule_walk(s, brg_program_capacity(programs[0]), local_step, &r, stuck, sizeof stuck);
    if (ret == BRG_ERR_FORMAT && stuck[0]) ret = brg_error(BRG_ERR_INTERNAL, "the schedule stopped: %s", stuck);
    for (int d = 0; d < p; d++) {
        brg_status st = brg_device_synchronize(brg_program_device(programs[d]));
        if (ret == BRG_OK && st != BRG_OK) ret = brg_error_context(st, "device %d at the end of the mini-batch", d);
    }
    /* A NaN that left a device explains a numeric error downstream. */
    if (ret == BRG_OK || ret == BRG_ERR_NUMERIC)
        for (int d = 0; d < p; d++) BRG_CHECK_GOTO(brg_program_check_messages(programs[d], NULL), ret, exit);
    if (ret != BRG_OK) goto exit;
    for (int d = 0; d < p; d++) BRG_CHECK_GOTO(brg_program_finish(programs[d]), ret, exit);
exit:
    brg_transfer_channels_destroy(r.channels, p);
    return ret;
}

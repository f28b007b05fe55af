/* brigade: the one single-threaded interpreter of a schedule's action lists
 * (internal). The verifier (is it deadlock-free with bounded channels?),
 * the simulator (when does each action start and end?) and the local
 * driver (run every device's program on one thread) are this walk with a
 * different step function; the executor, one thread per device, is the
 * only other runner of action lists.
 *
 * The rules every runner keeps: each device runs its list in order; a
 * RECV runs once its SEND has run; a SEND runs while its channel holds
 * fewer than `capacity` undelivered messages (0: unbounded). A channel is
 * one ordered pair of devices and one direction (activations or
 * gradients); messages are matched by micro-batch and stage, not by
 * arrival order. Devices sit on a work stack; a device runs until it
 * finishes or blocks, and a send wakes its receiver, a receive its sender:
 * the only two events that can unblock anyone. Each channel has one writer
 * and one reader, so whether the walk finishes does not depend on the order
 * in which devices are stepped. */
#ifndef BRIGADE_SCHEDULE_WALK_H
#define BRIGADE_SCHEDULE_WALK_H

#include <stddef.h>

#include "brigade/schedule.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called for action `index` of `device`'s list when it runs. A status other
 * than BRG_OK stops the walk, which returns it as it is. */
typedef brg_status (*brg_schedule_step_fn)(void *ctx, int device, int index, const brg_action *action);

/* Walk s with channels of `capacity` messages (0: unbounded), calling step
 * (NULL: nothing to do) for every action as it runs. BRG_OK when every list
 * has run to its end. When devices stop before that: BRG_ERR_FORMAT, and in
 * stuck (if not NULL; truncated to stuck_size) a report naming every stuck
 * device, the action it waits at and what for, e.g.
 *   deadlock with channel capacity 2: dev0 action 3 (RG0<1) waits for dev1
 *   to send the gradient of micro-batch 0; dev1 action 2 (RA1<0) waits for
 *   dev0 to send the activation of micro-batch 1 (2 of 2 devices stuck)
 * brg_last_error() is not set for a stuck walk: the caller says what was
 * walked. A message across no stage boundary (an incomplete schedule) is
 * BRG_ERR_FORMAT with a message. */
brg_status brg_schedule_walk(const brg_schedule *s, int capacity, brg_schedule_step_fn step, void *ctx, char *stuck,
                             size_t stuck_size);

/* brg_schedule_verify (verify.c), calling step (NULL: nothing to do) for
 * every action as its walk runs it: a verified walk and the run of a step
 * over it in one pass, as the simulator needs. On a failure the step may
 * have seen part of the actions. */
brg_status brg_schedule_verify_walk(const brg_schedule *s, int channel_capacity, brg_schedule_step_fn step,
                                    void *ctx, char *why, size_t why_size);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_SCHEDULE_WALK_H */

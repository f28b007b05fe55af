/* brigade: what a schedule is, for the schedule room's files (schedule.c
 * builds and reads schedules, verify.c checks them). */
#ifndef BRIGADE_SCHEDULE_IMPL_H
#define BRIGADE_SCHEDULE_IMPL_H

#include "brigade/schedule.h"

struct brg_schedule {
    brg_schedule_kind kind;
    int p, m, v;          /* devices, micro-batches, chunks per device */
    int *count;           /* [p] actions per device */
    brg_action **actions; /* [p] pointers into one slab */
};

/* A send or a receive. */
static inline int brg_action_is_comm(brg_action_type t)
{
    return t >= BRG_ACTION_SEND_ACT && t <= BRG_ACTION_RECV_GRAD;
}

#endif /* BRIGADE_SCHEDULE_IMPL_H */

/* brigade: what a schedule is, for the schedule room's files (schedule.c
 * builds and reads schedules, verify.c checks them). */
#ifndef BRIGADE_SCHEDULE_IMPL_H
#define BRIGADE_SCHEDULE_IMPL_H

#include "brigade/schedule.h"

struct brg_schedule {
    brg_schedule_kind kind;
    int p, m, v;          /* devices, micro-batches, chunks per device */
    int vshape;           /* 1: the V placement (odd chunks run back up the devices) */
    int *count;           /* [p] actions per device */
    brg_action **actions; /* [p] pointers into one slab */
};

/* The placement, unchecked: the virtual stage of (device, chunk), and the
 * device of virtual stage j. */
static inline int brg_sched_stage(int p, int vshape, int d, int c)
{
    return c * p + (vshape && (c & 1) ? p - 1 - d : d);
}

static inline int brg_sched_device(int p, int vshape, int j)
{
    const int r = j % p;
    return vshape && ((j / p) & 1) ? p - 1 - r : r;
}

/* A send or a receive. */
static inline int brg_action_is_comm(brg_action_type t)
{
    return t >= BRG_ACTION_SEND_ACT && t <= BRG_ACTION_RECV_GRAD;
}

/* schedule.c: the shape checks of build and create, and every device's
 * list of kind (order: a capped kind's computation orders from
 * brg_vshape_order, NULL for the others). */
brg_status brg_schedule_check_shape(const char *what, int p, int m, int v);
brg_status brg_schedule_emit(brg_schedule_kind kind, int p, int m, int v, const brg_action *order,
                             brg_schedule **out);

/* simulate.c: BRG_ERR_INVALID_ARGUMENT, naming `who`, the kind of time and
 * the stage, unless every time of V stages (and V - 1 boundaries, when
 * given) is present, finite and >= 0. */
brg_status brg_schedule_check_times(const brg_schedule_times *times, int V, const char *who);

/* vshape.c: the cap on chunk micro-batches a device holds under a V-shape
 * kind or ZB-H2 (0 for any other kind), and every device's computation
 * order by one of the BRG_VSHAPE_CONSTRUCTIONS constructions (0: the
 * timetable, V-shapes only, else BRG_ERR_UNSUPPORTED without a message;
 * 1: the list schedule, 2: the list schedule with one-message channels;
 * both at `times`, NULL for unit costs): order[d * 3vm + k] is device d's k-th of its 3vm
 * computations (F, B and W of each of its v chunks). */
#define BRG_VSHAPE_CONSTRUCTIONS 3
int brg_vshape_cap(brg_schedule_kind kind, int p);
brg_status brg_vshape_order(brg_schedule_kind kind, int construction, int p, int m, const brg_schedule_times *times,
                            brg_action *order);

#endif /* BRIGADE_SCHEDULE_IMPL_H */

/* Programs: one device's action list run over its stages (the
 * single-threaded driver of all devices is local.c). See program-impl.h for
 * what each action does and docs/training.md ("Programs and the dry
 * run"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/device-impl.h"
#include "base/internal.h"
#include "brigade/ops.h"
#include "program-impl.h"

struct brg_program {
    const brg_model *model;
    const brg_schedule *schedule;
    brg_device *dev;
    int device;          /* d */
    int p, m, v;         /* the schedule's shape */
    int micro_batch;     /* samples per micro-batch */
    float loss_scale;    /* the step's 1 / (counted labels); 0 until its first backward needs it */
    int64_t loss_count;  /* > 0: the counted labels of every replica (brg_program_set_loss_count) */
    int replica, replicas;
    int64_t step;        /* of the mini-batch being run (dropout masks) */
    int ran;             /* actions run since brg_program_begin */
    double loss_sum;     /* last virtual stage: loss x counted labels */
    int64_t correct, counted;
    brg_stage *stages[BRG_PROGRAM_MAX_CHUNKS];
    int slots[BRG_PROGRAM_MAX_CHUNKS];
    int *occupant[BRG_PROGRAM_MAX_CHUNKS]; /* per slot: the micro-batch holding it, or -1 */
    brg_tensor *tensors;  /* room for the tensors of one boundary (an action's transfer) */
    int max_tensors;
    /* Receive buffers, [grad][k] for the k-th device messages of that
     * direction come from (recv_from; two under the V placement, one
     * otherwise): `capacity` slots of recv_slot bytes each in the
     * device's arena, or NULL. */
    int capacity;
    unsigned char *recv[2][2];
    size_t recv_slot[2][2];
    int recv_from[2][2];
    /* Where anything is sent: one int32 on the device, zeroed when a step
     * begins, that the check of every message sent sets to the tag of the
     * first one holding a NaN or an infinity (BRG_OP_CHECK_FINITE). */
    int32_t *check_flag;
};

/* ---- creation ---- */

static int vstage(const brg_program *g, int chunk) { return brg_schedule_stage_of(g->schedule, g->device, chunk); }
static int is_first_vstage(const brg_program *g, int chunk) { return vstage(g, chunk) == 0; }
static int is_last_vstage(const brg_program *g, int chunk) { return vstage(g, chunk) == g->p * g->v - 1; }

/* The device of the stage before chunk's (grad 0: where its activations
 * come from) or after it (grad 1: where its output gradients come from);
 * -1 at the model's edge. */
static int neighbour(const brg_program *g, int chunk, int grad)
{
    const int j = vstage(g, chunk) + (grad ? 1 : -1);
    return j < 0 || j >= g->p * g->v ? -1 : brg_schedule_device_of(g->schedule, j);
}

/* The previous virtual stage is on this device (one device with several
 * chunks, or the V's turn): it is chunk - 1, and the tensors are handed
 * over in place, without messages. */
static int prev_on_device(const brg_program *g, int chunk) { return chunk > 0 && neighbour(g, chunk, 0) == g->device; }

static brg_status check_part(const brg_program *g, const brg_device_part *part)
{
    const int nb = brg_model_block_count(g->model);
    if (part->chunks != g->v)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device %d: the part has %d chunks, the %s schedule %d",
                         g->device, part->chunks, brg_schedule_kind_name(brg_schedule_get_kind(g->schedule)), g->v);
    for (int c = 0; c < g->v; c++) {
        const int j = vstage(g, c), first = part->first_block[c], last = part->last_block[c];
        if (first < 0 || last >= nb || first > last)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "device %d, chunk %d (virtual stage %d): blocks %d..%d are not a range inside 0..%d",
                             g->device, c, j, first, last, nb - 1);
        if ((first == 0) != is_first_vstage(g, c) || (last == nb - 1) != is_last_vstage(g, c))
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "device %d, chunk %d (virtual stage %d of %d): blocks %d..%d, but block 0 belongs to "
                             "virtual stage 0 and block %d to the last one, and only to them",
                             g->device, c, j, g->p * g->v, first, last, nb - 1);
        if (prev_on_device(g, c) && part->last_block[c - 1] + 1 != first)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "device %d: chunk %d ends at block %d but chunk %d starts at block %d; consecutive "
                             "virtual stages hold consecutive blocks",
                             g->device, c - 1, part->last_block[c - 1], c, first);
    }
    return BRG_OK;
}

static brg_status alloc_receive_buffers(brg_program *g);

brg_status brg_program_create(const brg_model *model, const brg_schedule *schedule, int device,
                              const brg_device_part *part, int micro_batch, const brg_optimizer_config *optimizer,
                              uint64_t seed, int deferred_batchnorm, brg_device *dev, brg_program **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_program_create: out is NULL");
    *out = NULL;
    if (!model || !schedule || !part || !optimizer || !dev)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_program_create: model, schedule, part, optimizer and device must be given");
    if (!brg_model_is_final(model))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is not finalized", brg_model_name(model));
    const int p = brg_schedule_devices(schedule), v = brg_schedule_chunks(schedule);
    if (device < 0 || device >= p)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device %d: the schedule has devices 0..%d", device, p - 1);
    if (v > BRG_PROGRAM_MAX_CHUNKS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "the schedule has %d chunks per device; programs take at most %d",
                         v, BRG_PROGRAM_MAX_CHUNKS);
    if (micro_batch < 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "micro-batch size %d must be at least 1", micro_batch);

    brg_status ret = BRG_OK;
    brg_program *g = brg_calloc(1, sizeof *g, "a program");
    if (!g) return BRG_ERR_HOST_MEMORY;
    g->model = model;
    g->schedule = schedule;
    g->dev = dev;
    g->device = device;
    g->p = p;
    g->m = brg_schedule_micro_batches(schedule);
    g->v = v;
    g->micro_batch = micro_batch;
    g->replicas = 1;
    g->step = 1;
    g->capacity = part->channel_capacity ? part->channel_capacity : BRG_CHANNEL_CAPACITY_DEFAULT;
    if (g->capacity < 1 || g->capacity > BRG_CHANNEL_CAPACITY_MAX) {
        ret = brg_error(BRG_ERR_INVALID_ARGUMENT, "device %d: channel capacity %d; it must be 1..%d (0 for %d)",
                        device, part->channel_capacity, BRG_CHANNEL_CAPACITY_MAX, BRG_CHANNEL_CAPACITY_DEFAULT);
        goto fail;
    }
    BRG_CHECK_GOTO(check_part(g, part), ret, fail);

    for (int c = 0; c < v; c++) {
        brg_stage_config sc;
        memset(&sc, 0, sizeof sc);
        sc.index = vstage(g, c);
        sc.first_block = part->first_block[c];
        sc.last_block = part->last_block[c];
        sc.max_batch = micro_batch;
        int slots = brg_schedule_max_in_flight(schedule, device, c);
        sc.slots = slots > 0 ? slots : 1;
        sc.optimizer = *optimizer;
        sc.seed = seed;
        sc.recompute = part->recompute[c] != 0;
        sc.deferred_batchnorm = deferred_batchnorm != 0;
        sc.sync_batchnorm = part->sync_batchnorm != 0;
        sc.edge_block = part->edge_block;
        g->slots[c] = sc.slots;
        g->occupant[c] = brg_malloc((size_t)sc.slots * sizeof(int), "program slots");
        if (!g->occupant[c]) {
            ret = BRG_ERR_HOST_MEMORY;
            goto fail;
        }
        for (int s = 0; s < sc.slots; s++) g->occupant[c][s] = -1;
        ret = brg_stage_create(model, dev, &sc, &g->stages[c]);
        if (ret != BRG_OK) {
            ret = brg_error_context(ret, "device %d, chunk %d (virtual stage %d)", device, c, sc.index);
            goto fail;
        }
        const brg_stage *st = g->stages[c];
        int k = brg_stage_input_count(st) > brg_stage_output_count(st) ? brg_stage_input_count(st)
                                                                        : brg_stage_output_count(st);
        if (k > g->max_tensors) g->max_tensors = k;
    }
    g->tensors = brg_calloc((size_t)(g->max_tensors > 0 ? g->max_tensors : 1), sizeof *g->tensors,
                            "program boundary tensors");
    if (!g->tensors) {
        ret = BRG_ERR_HOST_MEMORY;
        goto fail;
    }
    BRG_CHECK_GOTO(alloc_receive_buffers(g), ret, fail);
    *out = g;
    return BRG_OK;
fail:
    brg_program_destroy(g);
    return ret;
}

/* Bytes of the tensors at chunk c's input boundary (grad 0: what arrives
 * there) or output boundary (grad 1: their gradients), for one micro-batch,
 * each rounded as the arena rounds (a message keeps every tensor aligned). */
static size_t boundary_bytes(const brg_program *g, int c, int grad)
{
    const brg_stage *st = g->stages[c];
    const int k = grad ? brg_stage_output_count(st) : brg_stage_input_count(st);
    size_t bytes = 0;
    for (int i = 0; i < k; i++) {
        const int id = grad ? brg_stage_output_tensor(st, i) : brg_stage_input_tensor(st, i);
        const brg_model_tensor *t = brg_model_get_tensor(g->model, id);
        bytes += brg_arena_rounded((size_t)g->micro_batch * (size_t)(t->c * t->h * t->w) * sizeof(float));
    }
    return bytes;
}

/* The device a message arrives from at chunk c's input (activations) or
 * output (gradients): -1 where none does (the model's edge, or the
 * neighbour stage is on this device). */
static int receives_from(const brg_program *g, int c, int grad)
{
    const int from = neighbour(g, c, grad);
    return from == g->device ? -1 : from;
}

/* Room for `capacity` messages of each direction from each device that
 * sends here, each slot as large as the largest message it sends. */
static brg_status alloc_receive_buffers(brg_program *g)
{
    for (int grad = 0; grad < 2; grad++) {
        for (int k = 0; k < 2; k++) g->recv_from[grad][k] = -1;
        for (int c = 0; c < g->v; c++) {
            const int from = receives_from(g, c, grad);
            if (from < 0) continue;
            int k = 0;
            while (k < 2 && g->recv_from[grad][k] >= 0 && g->recv_from[grad][k] != from) k++;
            if (k == 2) return brg_error(BRG_ERR_INTERNAL, "device %d receives from more than two devices", g->device);
            g->recv_from[grad][k] = from;
            const size_t b = boundary_bytes(g, c, grad);
            if (b > g->recv_slot[grad][k]) g->recv_slot[grad][k] = b;
        }
        for (int k = 0; k < 2 && g->recv_from[grad][k] >= 0; k++) {
            char tag[96];
            snprintf(tag, sizeof tag, "receive buffers (%d %s from device %d)", g->capacity,
                     grad ? "gradients" : "activations", g->recv_from[grad][k]);
            void *p = NULL;
            brg_status st = brg_device_alloc(g->dev, (size_t)g->capacity * g->recv_slot[grad][k], tag, &p);
            if (st != BRG_OK) return brg_error_context(st, "device %d", g->device);
            g->recv[grad][k] = p;
        }
    }
    /* Every device of a pipeline both sends and receives. */
    if (g->p > 1) {
        void *flag = NULL;
        brg_status st = brg_device_alloc(g->dev, sizeof(int32_t), "message check flag", &flag);
        if (st != BRG_OK) return brg_error_context(st, "device %d", g->device);
        g->check_flag = flag;
    }
    return BRG_OK;
}

void brg_program_receive_buffers(const brg_program *g, int grad, int from, unsigned char **base, size_t *slot_bytes,
                                 int *slots)
{
    grad = grad != 0;
    *base = NULL;
    *slot_bytes = 0;
    *slots = g->capacity;
    for (int k = 0; k < 2; k++)
        if (g->recv_from[grad][k] >= 0 && g->recv_from[grad][k] == from) {
            *base = g->recv[grad][k];
            *slot_bytes = g->recv_slot[grad][k];
        }
}

size_t brg_program_receive_bytes(const brg_program *g)
{
    size_t slots = 0;
    for (int grad = 0; grad < 2; grad++)
        for (int k = 0; k < 2; k++) slots += g->recv_slot[grad][k];
    return (size_t)g->capacity * slots +
           (g->check_flag ? brg_arena_rounded(sizeof(int32_t)) : 0);
}

void brg_program_destroy(brg_program *g)
{
    if (!g) return;
    for (int grad = 0; grad < 2; grad++)
        for (int k = 0; k < 2; k++) brg_device_free(g->dev, g->recv[grad][k]);
    brg_device_free(g->dev, g->check_flag);
    for (int c = 0; c < BRG_PROGRAM_MAX_CHUNKS; c++) {
        brg_stage_destroy(g->stages[c]);
        free(g->occupant[c]);
    }
    free(g->tensors);
    free(g);
}

brg_device *brg_program_device(const brg_program *g) { return g->dev; }
int brg_program_device_index(const brg_program *g) { return g->device; }
const brg_schedule *brg_program_schedule(const brg_program *g) { return g->schedule; }
int brg_program_micro_batch(const brg_program *g) { return g->micro_batch; }
int brg_program_capacity(const brg_program *g) { return g->capacity; }
brg_stage *brg_program_stage(const brg_program *g, int chunk)
{
    return chunk >= 0 && chunk < g->v ? g->stages[chunk] : NULL;
}

void brg_program_loss(const brg_program *g, double *loss_sum, int64_t *correct, int64_t *counted)
{
    if (loss_sum) *loss_sum = g->loss_sum;
    if (correct) *correct = g->correct;
    if (counted) *counted = g->counted;
}

int brg_program_chunks(const brg_program *g) { return g->v; }

void brg_program_set_replica(brg_program *g, int replica, int replicas)
{
    g->replica = replica;
    g->replicas = replicas;
}

brg_status brg_program_set_gather(brg_program *g, brg_stage_gather_fn fn, void *ctx, int replicas)
{
    for (int c = 0; c < g->v; c++) BRG_CHECK(brg_stage_set_gather(g->stages[c], fn, ctx, replicas));
    return BRG_OK;
}

void brg_program_set_loss_count(brg_program *g, int64_t counted) { g->loss_count = counted; }

void brg_program_set_ignore_label(brg_program *g, int32_t ignore_label)
{
    for (int c = 0; c < g->v; c++) brg_stage_set_ignore_label(g->stages[c], ignore_label);
}

/* The multiplier of the loss's backward: 1 / (the labels the mini-batch's
 * loss counts), all of its labels but the ignored ones, so that the
 * micro-batches' gradients add up to those of the mean loss over the
 * mini-batch (a single device's). Without labels (a dry run) every label
 * counts. */
static float loss_scale(brg_program *g, brg_stage *last, const brg_program_io *io)
{
    if (g->loss_scale == 0.0f) {
        const int64_t n = (int64_t)g->m * g->micro_batch;
        const int64_t counted = g->loss_count > 0 ? g->loss_count
                                : io->labels ? brg_stage_counted_labels(last, io->labels, n)
                                             : n * brg_stage_label_count(last);
        g->loss_scale = counted > 0 ? 1.0f / (float)counted : -1.0f;
    }
    return g->loss_scale > 0.0f ? g->loss_scale : 0.0f;
}

void brg_program_persistent(const brg_program *g, size_t *total, size_t *weights, size_t *grads, size_t *optimizer)
{
    size_t t = brg_program_receive_bytes(g), w = 0, gr = 0, o = 0;
    for (int c = 0; c < g->v; c++) {
        if (!g->stages[c]) continue;
        size_t cw, cg, co;
        brg_stage_persistent_breakdown(g->stages[c], &cw, &cg, &co);
        t += brg_stage_persistent_bytes(g->stages[c]);
        w += cw;
        gr += cg;
        o += co;
    }
    if (total) *total = t;
    if (weights) *weights = w;
    if (grads) *grads = gr;
    if (optimizer) *optimizer = o;
}

/* ---- slots ---- */

static brg_status slot_busy_error(const brg_program *g, int c, int slot, int mb)
{
    return brg_error(BRG_ERR_INTERNAL,
                     "chunk %d (virtual stage %d): micro-batch %d needs slot %d, which micro-batch %d still holds: "
                     "the list keeps more micro-batches in flight than the %d slot%s counted by "
                     "brg_schedule_max_in_flight",
                     c, vstage(g, c), mb, slot, g->occupant[c][slot], g->slots[c], g->slots[c] == 1 ? "" : "s");
}

/* The slot micro-batch mb takes on chunk c (its first buffer is made now). */
static brg_status slot_take(brg_program *g, int c, int mb, int *slot)
{
    const int s = mb % g->slots[c];
    if (g->occupant[c][s] != mb && g->occupant[c][s] >= 0) return slot_busy_error(g, c, s, mb);
    g->occupant[c][s] = mb;
    *slot = s;
    return BRG_OK;
}

/* The slot micro-batch mb already holds on chunk c. */
static brg_status slot_held(const brg_program *g, int c, int mb, int *slot)
{
    const int s = mb % g->slots[c];
    if (g->occupant[c][s] != mb)
        return brg_error(BRG_ERR_INTERNAL, "chunk %d (virtual stage %d): micro-batch %d is not in flight here (slot %d "
                         "holds %s)", c, vstage(g, c), mb, s, g->occupant[c][s] >= 0 ? "another" : "nothing");
    *slot = s;
    return BRG_OK;
}

/* Let the slot go once the stage has emptied it. */
static void slot_update(brg_program *g, int c, int slot)
{
    if (!brg_stage_slot_in_use(g->stages[c], slot)) g->occupant[c][slot] = -1;
}

/* ---- actions ---- */

/* Copy micro-batch mb of a host array of micro_batch rows of `row` bytes
 * per micro-batch into t, which must hold exactly one micro-batch. */
static brg_status load(brg_program *g, const brg_tensor *t, const void *host, size_t row, int mb, const char *what)
{
    const size_t bytes = (size_t)g->micro_batch * row;
    if (brg_tensor_bytes(t) != bytes)
        return brg_error(BRG_ERR_INTERNAL, "the %s buffer does not hold one micro-batch", what);
    return brg_device_copy_in(g->dev, t->data, (const unsigned char *)host + (size_t)mb * bytes, bytes);
}

static brg_status call(brg_program_transfer fn, void *ctx, brg_program *g, const brg_action *a, brg_tensor *t,
                       int count)
{
    return fn ? fn(ctx, g, a, t, count) : BRG_OK;
}

/* ---- the finite check of messages ---- */

/* A message's tag in the check flag: the send (its micro-batch, chunk and
 * direction) and which of its tensors; 0 is "all finite". */
static int32_t message_tag(const brg_program *g, const brg_action *a, int tensor)
{
    const int grad = a->type == BRG_ACTION_SEND_GRAD;
    return 1 + (((int32_t)a->micro_batch * g->v + a->chunk) * 2 + grad) * g->max_tensors + tensor;
}

/* Queue the check of the message action a is about to send: a reduction
 * on the compute stream, nothing copied out. */
static brg_status check_message(brg_program *g, const brg_action *a, const brg_tensor *t, int count)
{
    if (!g->check_flag) return BRG_OK;
    const int64_t one = 1;
    brg_tensor flag;
    BRG_CHECK(brg_tensor_init(&flag, g->check_flag, BRG_I32, 1, &one, g->dev));
    for (int i = 0; i < count; i++) {
        if (t[i].dtype != BRG_F32 || brg_tensor_bytes(&t[i]) == 0) continue;
        brg_op op;
        memset(&op, 0, sizeof op);
        op.kind = BRG_OP_CHECK_FINITE;
        op.p.finite.tag = message_tag(g, a, i);
        op.n_in = 1;
        op.in[0] = &t[i];
        op.n_out = 1;
        op.out[0] = &flag;
        BRG_CHECK(brg_device_run(g->dev, &op));
    }
    return BRG_OK;
}

brg_status brg_program_check_messages(brg_program *g, int *found_grad)
{
    if (found_grad) *found_grad = -1;
    if (!g->check_flag) return BRG_OK;
    int32_t tag = 0;
    BRG_CHECK(brg_device_copy_out(g->dev, &tag, g->check_flag, sizeof tag));
    if (tag == 0) return BRG_OK;
    const int tensor = (tag - 1) % g->max_tensors, send = (tag - 1) / g->max_tensors;
    const int grad = send % 2, chunk = send / 2 % g->v, mb = send / 2 / g->v;
    if (tag < 0 || mb >= g->m)
        return brg_error(BRG_ERR_INTERNAL, "device %d: the message check flag holds %d, which names no send",
                         g->device, (int)tag);
    if (found_grad) *found_grad = grad;
    const brg_stage *st = g->stages[chunk];
    const int id = grad ? brg_stage_input_tensor(st, tensor) : brg_stage_output_tensor(st, tensor);
    const brg_model_tensor *mt = brg_model_get_tensor(g->model, id);
    return brg_error(BRG_ERR_NUMERIC,
                     "device %d, micro-batch %d: the %s of '%s' it sent to device %d holds a NaN or an infinity "
                     "(found by the device's check of messages): a NaN or Inf in the inputs or the weights, or a "
                     "learning rate too high",
                     g->device, mb, grad ? "gradient" : "activation", mt ? mt->name : "?",
                     neighbour(g, chunk, !grad));
}

/* The tensors chunk stage st sends from slot, in g->tensors: its outputs
 * (grad 0) or its input gradients (grad 1); their count in *k. */
static brg_status sent_tensors(brg_program *g, brg_stage *st, int slot, int grad, int *k)
{
    *k = grad ? brg_stage_input_count(st) : brg_stage_output_count(st);
    for (int i = 0; i < *k; i++)
        BRG_CHECK(grad ? brg_stage_input_grad(st, slot, i, &g->tensors[i])
                       : brg_stage_output(st, slot, i, &g->tensors[i]));
    return BRG_OK;
}

/* Hand chunk c-1's outputs of micro-batch mb over to chunk c's inputs on
 * this device (one device, several chunks): copy, then release them. */
static brg_status handover_forward(brg_program *g, int c, int mb, int slot)
{
    brg_stage *from = g->stages[c - 1], *to = g->stages[c];
    int from_slot;
    BRG_CHECK(slot_held(g, c - 1, mb, &from_slot));
    const int k = brg_stage_output_count(from);
    if (k != brg_stage_input_count(to))
        return brg_error(BRG_ERR_INTERNAL, "chunk %d has %d outputs but chunk %d %d inputs", c - 1, k, c,
                         brg_stage_input_count(to));
    for (int i = 0; i < k; i++) {
        brg_tensor src, dst;
        BRG_CHECK(brg_stage_output(from, from_slot, i, &src));
        BRG_CHECK(brg_stage_input(to, slot, i, g->micro_batch, &dst));
        BRG_CHECK(brg_device_copy_between(g->dev, dst.data, g->dev, src.data, brg_tensor_bytes(&src)));
    }
    return brg_stage_release_outputs(from, from_slot);
}

/* After chunk c's backward of micro-batch mb: its input gradients become
 * chunk c-1's output gradients on this device. */
static brg_status handover_backward(brg_program *g, int c, int mb, int slot)
{
    brg_stage *from = g->stages[c], *to = g->stages[c - 1];
    int to_slot;
    BRG_CHECK(slot_held(g, c - 1, mb, &to_slot));
    const int k = brg_stage_input_count(from);
    for (int i = 0; i < k; i++) {
        brg_tensor src, dst;
        BRG_CHECK(brg_stage_input_grad(from, slot, i, &src));
        BRG_CHECK(brg_stage_output_grad(to, to_slot, i, &dst));
        BRG_CHECK(brg_device_copy_between(g->dev, dst.data, g->dev, src.data, brg_tensor_bytes(&src)));
    }
    BRG_CHECK(brg_stage_release_input_grads(from, slot));
    slot_update(g, c, slot);
    return BRG_OK;
}

static brg_status run(brg_program *g, const brg_action *a, const brg_program_io *io)
{
    const int c = a->chunk, mb = a->micro_batch, n = g->micro_batch;
    brg_stage *st = g->stages[c];
    brg_tensor *t = g->tensors;
    int slot = 0;
    switch (a->type) {
    case BRG_ACTION_RECV_ACT: {
        BRG_CHECK(slot_take(g, c, mb, &slot));
        const int k = brg_stage_input_count(st);
        for (int i = 0; i < k; i++) BRG_CHECK(brg_stage_input(st, slot, i, n, &t[i]));
        return call(io->recv_act, io->ctx, g, a, t, k);
    }
    case BRG_ACTION_FORWARD: {
        BRG_CHECK(slot_take(g, c, mb, &slot));
        if (is_first_vstage(g, c)) {
            BRG_CHECK(brg_stage_input(st, slot, 0, n, &t[0]));
            if (io->images) {
                const brg_model_tensor *in = brg_model_get_tensor(g->model, brg_model_input(g->model));
                BRG_CHECK(load(g, &t[0], io->images, (size_t)(in->c * in->h * in->w) * sizeof(float), mb,
                               "model input"));
            }
        } else if (prev_on_device(g, c)) {
            BRG_CHECK(handover_forward(g, c, mb, slot));
        }
        const int last = is_last_vstage(g, c);
        if (last) {
            BRG_CHECK(brg_stage_labels(st, slot, n, &t[0]));
            if (io->labels)
                BRG_CHECK(load(g, &t[0], io->labels, (size_t)brg_stage_label_count(st) * sizeof(int32_t), mb,
                               "label"));
        }
        const brg_pass pass = {BRG_PASS_TRAIN, g->step, ((int64_t)mb * g->replicas + g->replica) * n};
        brg_stage_result res = {0.0f, 0, 0, NULL};
        BRG_CHECK(brg_stage_forward(st, slot, &pass, last ? &res : NULL));
        if (last) {
            if (!isfinite(res.loss))
                return brg_error(BRG_ERR_NUMERIC,
                                 "the loss of micro-batch %d is %s (stage %d): a NaN or Inf in the "
                                 "inputs, the weights, or a learning rate too high",
                                 mb, isnan(res.loss) ? "NaN" : "Inf", vstage(g, c));
            const int64_t px = brg_stage_label_count(st);
            const int64_t counted = io->labels ? brg_stage_counted_labels(st, io->labels + (int64_t)mb * n * px, n)
                                               : (int64_t)n * px;
            g->loss_sum += (double)res.loss * (double)counted;
            g->correct += res.correct;
            g->counted += counted;
        }
        return BRG_OK;
    }
    case BRG_ACTION_SEND_ACT: {
        BRG_CHECK(slot_held(g, c, mb, &slot));
        int k = 0;
        BRG_CHECK(sent_tensors(g, st, slot, 0, &k));
        BRG_CHECK(check_message(g, a, t, k));
        BRG_CHECK(call(io->send_act, io->ctx, g, a, t, k));
        return brg_stage_release_outputs(st, slot);
    }
    case BRG_ACTION_RECV_GRAD: {
        BRG_CHECK(slot_held(g, c, mb, &slot));
        const int k = brg_stage_output_count(st);
        for (int i = 0; i < k; i++) BRG_CHECK(brg_stage_output_grad(st, slot, i, &t[i]));
        return call(io->recv_grad, io->ctx, g, a, t, k);
    }
    case BRG_ACTION_BACKWARD:
    case BRG_ACTION_BACKWARD_INPUT: {
        BRG_CHECK(slot_held(g, c, mb, &slot));
        const float scale = is_last_vstage(g, c) ? loss_scale(g, st, io) : 0.0f;
        if (a->type == BRG_ACTION_BACKWARD) BRG_CHECK(brg_stage_backward(st, slot, scale));
        else BRG_CHECK(brg_stage_backward_input(st, slot, scale));
        if (prev_on_device(g, c)) BRG_CHECK(handover_backward(g, c, mb, slot));
        slot_update(g, c, slot);
        return BRG_OK;
    }
    case BRG_ACTION_SEND_GRAD: {
        BRG_CHECK(slot_held(g, c, mb, &slot));
        int k = 0;
        BRG_CHECK(sent_tensors(g, st, slot, 1, &k));
        BRG_CHECK(check_message(g, a, t, k));
        BRG_CHECK(call(io->send_grad, io->ctx, g, a, t, k));
        BRG_CHECK(brg_stage_release_input_grads(st, slot));
        slot_update(g, c, slot);
        return BRG_OK;
    }
    case BRG_ACTION_BACKWARD_WEIGHT:
        BRG_CHECK(slot_held(g, c, mb, &slot));
        BRG_CHECK(brg_stage_backward_weight(st, slot));
        slot_update(g, c, slot);
        return BRG_OK;
    default: break;
    }
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown action type %d", (int)a->type);
}

/* ---- the warm-up ---- */

/* Whether the device's action list has an action of type on chunk c. */
static int chunk_runs(const brg_program *g, int c, brg_action_type type)
{
    const int n = brg_schedule_action_count(g->schedule, g->device);
    for (int i = 0; i < n; i++) {
        const brg_action *a = brg_schedule_action(g->schedule, g->device, i);
        if (a->chunk == c && a->type == type) return 1;
    }
    return 0;
}

/* The tensors of a boundary allocated in slot 0 (outputs: their
 * gradients) and zeroed. */
static brg_status zeroed(brg_program *g, brg_stage *st, int grads, int k)
{
    for (int i = 0; i < k; i++) {
        BRG_CHECK(grads ? brg_stage_output_grad(st, 0, i, &g->tensors[i])
                        : brg_stage_input(st, 0, i, g->micro_batch, &g->tensors[i]));
        BRG_CHECK(brg_device_memset_zero(g->dev, g->tensors[i].data, brg_tensor_bytes(&g->tensors[i])));
    }
    return BRG_OK;
}

/* What a send of chunk c's slot 0 does on the device: its check of the
 * message (activations, grad 0, or input gradients), then the release. */
static brg_status warm_send(brg_program *g, int c, int grad)
{
    brg_stage *st = g->stages[c];
    const brg_action send = {.type = grad ? BRG_ACTION_SEND_GRAD : BRG_ACTION_SEND_ACT, .chunk = c};
    int k = 0;
    BRG_CHECK(sent_tensors(g, st, 0, grad, &k));
    BRG_CHECK(check_message(g, &send, g->tensors, k));
    return grad ? brg_stage_release_input_grads(st, 0) : brg_stage_release_outputs(st, 0);
}

/* One micro-batch of zeros through chunk c in slot 0 and back, the
 * backward whole or split as the step runs it, the sends' checks of
 * messages included: every kernel the chunk's step launches, with the
 * step's shapes. labels: one micro-batch's, for the last virtual stage. */
static brg_status warm_chunk(brg_program *g, int c, int split, const int32_t *labels)
{
    brg_stage *st = g->stages[c];
    const int last = is_last_vstage(g, c), first = is_first_vstage(g, c);
    brg_tensor *t = g->tensors;
    BRG_CHECK(zeroed(g, st, 0, brg_stage_input_count(st)));
    if (last) {
        BRG_CHECK(brg_stage_labels(st, 0, g->micro_batch, &t[0]));
        BRG_CHECK(brg_device_copy_in(g->dev, t[0].data, labels, brg_tensor_bytes(&t[0])));
    }
    const brg_pass pass = {BRG_PASS_TRAIN, 0, 0};
    brg_stage_result res = {0.0f, 0, 0, NULL};
    BRG_CHECK(brg_stage_forward(st, 0, &pass, last ? &res : NULL));
    if (!last) {
        BRG_CHECK(warm_send(g, c, 0));
        BRG_CHECK(zeroed(g, st, 1, brg_stage_output_count(st)));
    }
    const float scale = last ? 1.0f / (float)g->micro_batch : 0.0f;
    BRG_CHECK(split ? brg_stage_backward_input(st, 0, scale) : brg_stage_backward(st, 0, scale));
    if (!first) BRG_CHECK(warm_send(g, c, 1));
    return split ? brg_stage_backward_weight(st, 0) : BRG_OK;
}

brg_status brg_program_warm_up(brg_program *g)
{
    const int64_t n_labels = (int64_t)g->micro_batch * brg_model_label_count(g->model);
    int32_t *labels = brg_malloc((size_t)n_labels * sizeof *labels, "the warm-up's labels");
    if (!labels) return BRG_ERR_HOST_MEMORY;
    brg_status st = BRG_OK;
    brg_device_set_warming(g->dev, 1); /* wider workspaces too, both sizes */
    for (int c = 0; c < g->v && st == BRG_OK; c++) {
        brg_stage *s = g->stages[c];
        /* a label the loss counts */
        const int32_t label = brg_stage_get_config(s)->ignore_label == 0 && brg_model_classes(g->model) > 1 ? 1 : 0;
        for (int64_t i = 0; i < n_labels; i++) labels[i] = label;
        brg_stage_freeze_statistics(s, 1);
        for (int split = 0; split < 2 && st == BRG_OK; split++)
            if (chunk_runs(g, c, split ? BRG_ACTION_BACKWARD_INPUT : BRG_ACTION_BACKWARD))
                st = warm_chunk(g, c, split, labels);
        brg_stage_freeze_statistics(s, 0);
        if (st != BRG_OK) {
            st = brg_error_context(st, "device %d, warming up chunk %d (virtual stage %d)", g->device, c, vstage(g, c));
            brg_stage_discard(s, 0);
        }
        const brg_status zero = brg_stage_zero_grads(s);
        if (st == BRG_OK) st = zero;
    }
    brg_device_set_warming(g->dev, 0);
    /* the flag the checks set, should zeros not be finite */
    if (st == BRG_OK && g->check_flag) st = brg_device_memset_zero(g->dev, g->check_flag, sizeof(int32_t));
    if (st == BRG_OK) st = brg_device_synchronize(g->dev);
    free(labels);
    return st;
}

brg_status brg_program_begin(brg_program *g, int64_t step)
{
    for (int c = 0; c < g->v; c++)
        for (int s = 0; s < g->slots[c]; s++)
            if (g->occupant[c][s] >= 0)
                return brg_error(BRG_ERR_INVALID_ARGUMENT,
                                 "device %d: a mini-batch cannot begin while micro-batch %d is in flight on chunk %d",
                                 g->device, g->occupant[c][s], c);
    g->step = step;
    g->ran = 0;
    g->loss_sum = 0.0;
    g->correct = 0;
    g->counted = 0;
    g->loss_scale = 0.0f;
    return g->check_flag ? brg_device_memset_zero(g->dev, g->check_flag, sizeof(int32_t)) : BRG_OK;
}

brg_status brg_program_run_action(brg_program *g, const brg_action *a, const brg_program_io *io)
{
    static const brg_program_io no_io = {0};
    const int index = g->ran++;
    if (!a || a->chunk < 0 || a->chunk >= g->v || a->micro_batch < 0 || a->micro_batch >= g->m)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device %d, action %d: %s", g->device, index,
                         a ? "chunk or micro-batch out of the schedule's range" : "no action");
    brg_status st = run(g, a, io ? io : &no_io);
    if (st != BRG_OK) {
        char token[48];
        brg_action_format(a, g->v, token, sizeof token);
        return brg_error_context(st, "device %d, action %d (%s)", g->device, index, token);
    }
    return BRG_OK;
}

void brg_program_abort(brg_program *g)
{
    for (int c = 0; c < g->v; c++)
        for (int s = 0; s < g->slots[c]; s++) {
            brg_stage_discard(g->stages[c], s);
            g->occupant[c][s] = -1;
        }
}

brg_status brg_program_finish(brg_program *g)
{
    for (int c = 0; c < g->v; c++)
        for (int s = 0; s < g->slots[c]; s++)
            if (g->occupant[c][s] >= 0)
                return brg_error(BRG_ERR_INTERNAL,
                                 "device %d: micro-batch %d is still in flight on chunk %d (virtual stage %d) after "
                                 "the device's last action",
                                 g->device, g->occupant[c][s], c, vstage(g, c));
    return BRG_OK;
}

brg_status brg_program_step(brg_program *g, float lr, int64_t step)
{
    for (int c = 0; c < g->v; c++) BRG_CHECK(brg_stage_step(g->stages[c], lr, step));
    return BRG_OK;
}

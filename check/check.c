/* The kernel correctness harness (see brigade/check.h): running a case.
 *
 * One run of a case goes: draw inputs on the host from the seed, copy them
 * into guarded device tensors, run the forward kind through brg_device_run,
 * copy the outputs back and compare them with the double reference
 * (backends/ref); then run each backward kind with a random dy and compare
 * every gradient with central finite differences of the double reference;
 * then run each backward again with accumulate = 1 over a random prefill.
 *
 * Everything goes through the public device API, so a GPU backend is
 * checked by the same code. All state of a run lives in one `ck` context
 * that owns every host and device allocation, so every path out of a run
 * frees everything with one cleanup.
 *
 * Guarding: every device tensor (and workspace) sits between two bands of
 * GUARD NaNs whose payload names the tensor, so a write outside a tensor
 * shows up as a changed band; outputs are filled with another NaN (POISON)
 * before a non-accumulating run, so an element a kernel forgets to write
 * reads back as NaN (an infinite error). Inputs whose host copy is known are
 * compared bit for bit after each op, so a kernel that scribbles on an input
 * is caught.
 *
 * Errors are normwise relative errors, measured against the magnitude of
 * the terms a value was computed from where a result can cancel (see
 * rel_error and ck_abs_mode), so float32 rounding in a sum that happens to
 * come out near zero is not mistaken for a wrong kernel.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check-impl.h"

/* ---- the run context ---- */


/* A host allocation owned by the run. NULL (and k->st set) on failure. */
void *brg_ck_host(ck *k, size_t count, size_t size)
{
    if (!ck_ok(k)) return NULL;
    if (k->n_host == k->cap_host) {
        size_t cap = k->cap_host ? 2 * k->cap_host : 64;
        void **grown = realloc(k->host, cap * sizeof *grown);
        if (!grown) {
            k->st = brg_error(BRG_ERR_HOST_MEMORY, "check: cannot grow the list of host buffers");
            brg_ck_fail(k, "%s", brg_last_error());
            return NULL;
        }
        k->host = grown;
        k->cap_host = cap;
    }
    void *p = brg_calloc(count, size, "a kernel check buffer");
    if (!p) {
        k->st = BRG_ERR_HOST_MEMORY;
        brg_ck_fail(k, "%s", brg_last_error());
        return NULL;
    }
    k->host[k->n_host++] = p;
    return p;
}

/* Record the first failure message of the case. */
void brg_ck_fail(ck *k, const char *fmt, ...)
{
    k->res->passed = 0;
    if (k->res->message[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->res->message, sizeof k->res->message, fmt, ap);
    va_end(ap);
}

/* Name the culprit of the first non-numeric failure in res->worst. */
void brg_ck_blame(ck *k, const char *fmt, ...)
{
    if (k->worst_locked) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->res->worst, sizeof k->res->worst, fmt, ap);
    va_end(ap);
    k->worst_locked = 1;
}

/* A call failed: keep its status and message. */
static void ck_call_failed(ck *k, brg_status st, const char *what)
{
    if (!ck_ok(k)) return;
    k->st = st;
    const char *msg = brg_last_error();
    if (strstr(msg, what))
        brg_ck_fail(k, "%s", msg);
    else
        brg_ck_fail(k, "%s: %s", what, msg[0] ? msg : brg_status_string(st));
}

/* The guard band of block id on one side: quiet NaNs whose payload encodes
 * the block, the side and the position, so a kernel that copies one guard
 * band into another (a read and a write both one past the end) still
 * changes the band it writes. Distinct from POISON (bit 21 set). */
static void guard_band(float *band, int id, int side)
{
    for (uint32_t i = 0; i < GUARD; i++) {
        uint32_t bits = 0x7fe00000u | ((uint32_t)(id & 0x3fff) << 7) | ((uint32_t)side << 6) | i;
        memcpy(&band[i], &bits, sizeof bits);
    }
}

/* Write count floats of pattern (len of them, repeated) to dst on the device. */
static void ck_write_pattern(ck *k, float *dst, int64_t count, const float *pattern, int64_t len)
{
    for (int64_t done = 0; done < count && ck_ok(k); done += len) {
        int64_t n = count - done < len ? count - done : len;
        brg_status st = brg_device_copy_in(k->dev, dst + done, pattern, (size_t)n * sizeof(float));
        if (st != BRG_OK) ck_call_failed(k, st, "copying into the device");
    }
}

/* Lay out a guarded block of count data floats: guard, poisoned data, guard. */
static void ck_guard_block(ck *k, float *block, int64_t count, int id)
{
    float band[GUARD];
    guard_band(band, id, 0);
    ck_write_pattern(k, block, GUARD, band, GUARD);
    ck_write_pattern(k, block + GUARD, count, k->poison, POISON_CHUNK);
    guard_band(band, id, 1);
    ck_write_pattern(k, block + GUARD + count, GUARD, band, GUARD);
}

/* 1 if both guard bands of the block are intact; 0 if not (or a copy failed). */
static int ck_guard_intact(ck *k, const float *block, int64_t count, int id, int *side_out)
{
    float band[GUARD], want[GUARD];
    for (int side = 0; side < 2; side++) {
        brg_status st = brg_device_copy_out(k->dev, band, side ? block + GUARD + count : block, sizeof band);
        if (st != BRG_OK) {
            ck_call_failed(k, st, "copying from the device");
            return 0;
        }
        guard_band(want, id, side);
        if (memcmp(band, want, sizeof band) != 0) {
            *side_out = side;
            return 0;
        }
    }
    return 1;
}

/* A device tensor with guard bands, poisoned, and its host mirror. */
ck_tensor *brg_ck_tensor_new(ck *k, const char *name, brg_dtype dtype, int ndim, const int64_t *shape)
{
    if (!ck_ok(k)) return NULL;
    if (k->n_tens == CK_MAX_TENSORS) {
        k->st = brg_error(BRG_ERR_INTERNAL, "check: too many tensors");
        return NULL;
    }
    ck_tensor *t = brg_ck_host(k, 1, sizeof *t);
    if (!t) return NULL;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    t->numel = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->numel *= shape[d];
    }
    t->host = brg_ck_host(k, (size_t)t->numel, 4);
    if (dtype == BRG_F32) t->ref = brg_ck_host(k, (size_t)t->numel, sizeof(double));
    if (!ck_ok(k)) return NULL;
    char tag[64];
    snprintf(tag, sizeof tag, "check %s", name);
    brg_status st = brg_device_alloc(k->dev, (size_t)(t->numel + 2 * GUARD) * 4, tag, &t->mem);
    if (st != BRG_OK) {
        ck_call_failed(k, st, "allocating a check tensor");
        return NULL;
    }
    k->tens[k->n_tens++] = t;
    brg_tensor_init(&t->t, (float *)t->mem + GUARD, dtype, ndim, shape, k->dev);
    ck_guard_block(k, t->mem, t->numel, k->n_tens);
    return ck_ok(k) ? t : NULL;
}

void brg_ck_upload(ck *k, ck_tensor *t)
{
    if (!ck_ok(k) || !t) return;
    brg_status st = brg_device_copy_in(k->dev, t->t.data, t->host, (size_t)t->numel * 4);
    if (st != BRG_OK) ck_call_failed(k, st, "copying into the device");
    t->mirrored = 1;
}

void brg_ck_download(ck *k, ck_tensor *t)
{
    if (!ck_ok(k) || !t) return;
    brg_status st = brg_device_copy_out(k->dev, t->host, t->t.data, (size_t)t->numel * 4);
    if (st != BRG_OK) ck_call_failed(k, st, "copying from the device");
    t->mirrored = 1;
}

static void ck_poison(ck *k, ck_tensor *t)
{
    if (!t) return;
    ck_write_pattern(k, t->t.data, t->numel, k->poison, POISON_CHUNK);
    t->mirrored = 0;
}


/* Draw the host values of a float tensor, set its double copy, upload. */
static void ck_fill(ck *k, ck_tensor *t, enum fill_kind kind)
{
    if (!ck_ok(k) || !t) return;
    float *h = t->host;
    ck_rng *r = &k->rng;
    if (kind == FILL_DISTINCT) {
        int64_t *perm = brg_ck_host(k, (size_t)t->numel, sizeof *perm);
        if (!perm) return;
        for (int64_t i = 0; i < t->numel; i++) perm[i] = i;
        for (int64_t i = t->numel - 1; i > 0; i--) {
            int64_t j = rng_int(r, 0, i), tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        for (int64_t i = 0; i < t->numel; i++) h[i] = (float)((double)(perm[i] - t->numel / 2) * 0.01 + 0.005);
    } else {
        static const float tie_values[3] = {-0.25f, -0.5f, -1.0f};
        for (int64_t i = 0; i < t->numel; i++) {
            double u = rng_unit(r);
            double v;
            switch (kind) {
            case FILL_SIGNED: v = (rng_next(r) & 1 ? -1.0 : 1.0) * (0.1 + 0.9 * u); break;
            case FILL_UNIFORM: v = 2.0 * u - 1.0; break;
            case FILL_TIES: v = tie_values[rng_int(r, 0, 2)]; break;
            case FILL_SHIFTED: v = 0.3 + 2.0 * u - 1.0; break;
            case FILL_FAR: v = 1000.0 + 2.0 * u - 1.0; break;
            case FILL_POSITIVE: v = 0.5 + u; break;
            default: v = 6.0 * u - 3.0; break;
            }
            h[i] = (float)v;
        }
    }
    for (int64_t i = 0; i < t->numel; i++) t->ref[i] = h[i];
    brg_ck_upload(k, t);
}

/* A float input tensor filled with kind; NULL if absent or on failure. */
ck_tensor *brg_ck_input(ck *k, const char *name, int ndim, const int64_t *shape, enum fill_kind kind)
{
    ck_tensor *t = brg_ck_tensor_new(k, name, BRG_F32, ndim, shape);
    ck_fill(k, t, kind);
    return t;
}

ck_tensor *brg_ck_vector(ck *k, const char *name, int64_t n, enum fill_kind kind)
{
    return brg_ck_input(k, name, 1, &n, kind);
}

ck_tensor *brg_ck_output(ck *k, const char *name, int ndim, const int64_t *shape)
{
    return brg_ck_tensor_new(k, name, BRG_F32, ndim, shape);
}

static ck_tensor *ck_find(ck *k, const brg_tensor *t)
{
    for (int i = 0; i < k->n_tens; i++)
        if (&k->tens[i]->t == t) return k->tens[i];
    return NULL;
}

/* Check that every tensor's guard bands are intact. */
static void ck_check_guards(ck *k, const char *opname)
{
    for (int i = 0; i < k->n_tens && ck_ok(k); i++) {
        ck_tensor *t = k->tens[i];
        int side = 0;
        if (!ck_guard_intact(k, t->mem, t->numel, i + 1, &side) && ck_ok(k)) {
            brg_ck_fail(k, "%s wrote outside tensor '%s' (the guard band %s it changed)", opname, t->name,
                        side ? "after" : "before");
            brg_ck_blame(k, "%s guard", t->name);
        }
    }
}

/* Check that the op's inputs (those with a known host copy and not also an
 * output) still hold what they held before. */
static void ck_check_inputs(ck *k, const brg_op *op, const char *opname)
{
    for (int i = 0; i < op->n_in && ck_ok(k); i++) {
        ck_tensor *t = ck_find(k, op->in[i]);
        if (!t || !t->mirrored) continue;
        int aliased = 0;
        for (int j = 0; j < op->n_out; j++)
            if (op->out[j] && op->out[j]->data == t->t.data) aliased = 1;
        if (aliased) continue;
        void *now = malloc((size_t)t->numel * 4);
        if (!now) {
            k->st = brg_error(BRG_ERR_HOST_MEMORY, "check: cannot allocate %lld bytes", (long long)t->numel * 4);
            brg_ck_fail(k, "%s", brg_last_error());
            return;
        }
        brg_status st = brg_device_copy_out(k->dev, now, t->t.data, (size_t)t->numel * 4);
        if (st != BRG_OK)
            ck_call_failed(k, st, "copying from the device");
        else if (memcmp(now, t->host, (size_t)t->numel * 4) != 0) {
            brg_ck_fail(k, "%s modified its input '%s'", opname, t->name);
            brg_ck_blame(k, "%s", t->name);
        }
        free(now);
    }
}

/* ---- the extra oracle (brg_check_options.oracle) ---- */

/* The distinct tensors an op reads or writes, each once. */
static int op_tensors(const brg_op *op, const brg_tensor **list)
{
    int n = 0;
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const brg_tensor *t = i < op->n_in ? op->in[i] : op->out[i - op->n_in];
        int seen = !t;
        for (int j = 0; j < n && !seen; j++) seen = list[j] == t;
        if (!seen) list[n++] = t;
    }
    return n;
}

/* What an op on the checked device read and held, copied out before it
 * ran: the oracle device starts from the same bytes. */
typedef struct oracle_snap {
    int n;
    const brg_tensor *t[2 * BRG_OP_MAX_TENSORS];
    void *before[2 * BRG_OP_MAX_TENSORS];
} oracle_snap;

static void oracle_before(ck *k, const brg_op *op, oracle_snap *snap)
{
    snap->n = op_tensors(op, snap->t);
    for (int i = 0; i < snap->n && ck_ok(k); i++) {
        const size_t bytes = brg_tensor_bytes(snap->t[i]);
        snap->before[i] = brg_ck_host(k, bytes ? bytes : 1, 1);
        if (!snap->before[i]) return;
        const brg_status st = brg_device_copy_out(k->dev, snap->before[i], snap->t[i]->data, bytes);
        if (st != BRG_OK) ck_call_failed(k, st, "copying an op's tensors out for the oracle");
    }
}

/* ---- the blocked twin ----
 *
 * On a device that keeps activations channel-blocked between layers
 * (brg_device_channel_block), every op of a kind that takes blocked
 * tensors runs a second time on the same device with its image tensors
 * blocked, as a stage would hand them, and must give the same bits. */

/* Whether t, tensor i of op (an output when is_out), is an image tensor
 * that a stage would block by b: 4-D float32 with channels a multiple of
 * b, not a convolution's filter, not global pooling's [N, C, 1, 1] side. */
static int twin_blocks(const brg_op *op, const brg_tensor *t, int is_out, int i, int b)
{
    if (!t || t->dtype != BRG_F32 || t->ndim != 4 || t->shape[1] % b != 0) return 0;
    return brg_op_may_block(op, is_out, i);
}

/* The block the twin of op runs with: 0 where there is none (the device
 * keeps plain tensors, the kind takes none blocked, or, for kinds that
 * take their tensors in one layout, one of them cannot be blocked). */
static int twin_block(const ck *k, const brg_op *op)
{
    const int b = brg_device_channel_block(k->dev);
    if (!b || !brg_op_takes_blocked(op->kind)) return 0;
    const int each = !brg_op_blocks_in_one_layout(op->kind);
    int any = 0;
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const int is_out = i >= op->n_in, j = is_out ? i - op->n_in : i;
        const brg_tensor *t = is_out ? op->out[j] : op->in[j];
        if (!t) continue;
        const int blocks = twin_blocks(op, t, is_out, j, b);
        if (!blocks && !each && t->ndim == 4) return 0;
        any |= blocks;
    }
    return any ? b : 0;
}

/* Run op on device od (the oracle, or with block > 0 the checked device's
 * blocked twin) from the snapshot and compare every output with what the
 * checked device wrote: within the family's tolerance on the oracle,
 * bit for bit on the twin. */
static void oracle_after(ck *k, const brg_op *op, const oracle_snap *snap, brg_device *od, int block)
{
    const char *opname = brg_op_kind_name(op->kind);
    const char *who = block ? "its blocked twin" : "the oracle";
    brg_tensor copies[2 * BRG_OP_MAX_TENSORS];
    void *mem[2 * BRG_OP_MAX_TENSORS] = {0};
    brg_op oop = *op;
    oop.workspace = NULL; /* the oracle lends its own */
    oop.workspace_bytes = 0;
    brg_status st = BRG_OK;
    for (int i = 0; i < snap->n && st == BRG_OK; i++) {
        const size_t bytes = brg_tensor_bytes(snap->t[i]);
        copies[i] = *snap->t[i];
        const void *from = snap->before[i];
        if (block) { /* block the image tensors, as the op's roles allow */
            for (int j = 0; j < op->n_in + op->n_out; j++) {
                const int is_out = j >= op->n_in, r = is_out ? j - op->n_in : j;
                if ((is_out ? op->out[r] : op->in[r]) == snap->t[i] &&
                    twin_blocks(op, snap->t[i], is_out, r, block))
                    copies[i].block = block;
            }
            if (copies[i].block) {
                void *blocked = brg_ck_host(k, bytes ? bytes : 1, 1);
                brg_tensor plain_t = *snap->t[i], blocked_t = copies[i];
                plain_t.data = snap->before[i];
                blocked_t.data = blocked;
                st = blocked ? brg_tensor_copy_layout(&plain_t, &blocked_t) : BRG_ERR_OUT_OF_MEMORY;
                from = blocked;
            }
        }
        if (st == BRG_OK) st = brg_device_alloc(od, bytes ? bytes : 1, "check oracle", &mem[i]);
        if (st == BRG_OK) st = brg_device_copy_in(od, mem[i], from, bytes);
        copies[i].data = mem[i];
        copies[i].device = od;
    }
    for (int i = 0; i < oop.n_in + oop.n_out; i++) {
        const brg_tensor **slot = i < oop.n_in ? &oop.in[i] : &oop.out[i - oop.n_in];
        for (int j = 0; j < snap->n; j++)
            if (*slot && *slot == snap->t[j]) {
                *slot = &copies[j];
                break;
            }
    }
    if (st == BRG_OK) st = brg_device_run(od, &oop);
    if (st == BRG_OK) st = brg_device_synchronize(od);
    if (st != BRG_OK)
        ck_call_failed(k, st, block ? "running the op's blocked twin" : "running the op on the oracle device");
    const int which = op->accumulate ? WHICH_ACC : strstr(opname, "backward") ? WHICH_BWD : WHICH_FWD;
    brg_check_result *res = k->res;
    const double tol = which == WHICH_FWD ? res->forward_tol : which == WHICH_BWD ? res->backward_tol
                                                                                 : res->accumulate_tol;
    for (int o = 0; o < op->n_out && ck_ok(k); o++) {
        const brg_tensor *t = op->out[o];
        if (!t) continue;
        const int64_t n = brg_tensor_numel(t);
        if (t->dtype == BRG_I32) { /* counts and flags: exactly equal */
            int32_t *got = brg_ck_host(k, (size_t)(n ? n : 1), sizeof(int32_t));
            int32_t *want = brg_ck_host(k, (size_t)(n ? n : 1), sizeof(int32_t));
            if (!got || !want) break;
            st = brg_device_copy_out(k->dev, got, t->data, (size_t)n * sizeof(int32_t));
            if (st == BRG_OK) st = brg_device_copy_out(od, want, oop.out[o]->data, (size_t)n * sizeof(int32_t));
            if (st != BRG_OK) {
                ck_call_failed(k, st, "copying the oracle's outputs");
                break;
            }
            for (int64_t i = 0; i < n; i++)
                if (got[i] != want[i]) {
                    const double ratio = tol > 0 ? 1.0 / tol : 1.0; /* a difference of at least 1 */
                    if (!block && !(ratio <= res->oracle_error)) res->oracle_error = ratio;
                    brg_ck_fail(k, "%s output %d element %lld is %d on %s but %d on %s %s", opname, o,
                                (long long)i, (int)got[i], brg_device_name(k->dev), (int)want[i], who,
                                brg_device_name(od));
                    brg_ck_blame(k, block ? "blocked twin" : "oracle");
                    break;
                }
            continue;
        }
        if (t->dtype != BRG_F32) continue;
        float *got = brg_ck_host(k, (size_t)(n ? n : 1), sizeof(float));
        float *want = brg_ck_host(k, (size_t)(n ? n : 1), sizeof(float));
        if (!got || !want) break;
        st = brg_device_copy_out(k->dev, got, t->data, (size_t)n * sizeof(float));
        if (st == BRG_OK) st = brg_device_copy_out(od, want, oop.out[o]->data, (size_t)n * sizeof(float));
        if (st == BRG_OK && oop.out[o]->block) { /* back to plain */
            float *plain = brg_ck_host(k, (size_t)(n ? n : 1), sizeof(float));
            brg_tensor from = *oop.out[o], to = *t;
            from.data = want;
            to.data = plain;
            to.block = 0;
            st = plain ? brg_tensor_copy_layout(&from, &to) : BRG_ERR_OUT_OF_MEMORY;
            want = plain;
        }
        if (st != BRG_OK) {
            ck_call_failed(k, st, "copying the oracle's outputs");
            break;
        }
        if (block) {
            if (n && memcmp(got, want, (size_t)n * sizeof(float)) != 0) {
                int64_t i = 0;
                while (i < n && memcmp(&got[i], &want[i], sizeof(float)) == 0) i++;
                brg_ck_fail(k, "%s output %d element %lld is %.9g in plain NCHW on %s but %.9g blocked by %d",
                            opname, o, (long long)i, (double)got[i], brg_device_name(k->dev), (double)want[i],
                            block);
                brg_ck_blame(k, "blocked twin");
            }
            continue;
        }
        double dmax = 0.0, wmax = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const double d = fabs((double)got[i] - (double)want[i]);
            dmax = d > dmax || isnan(d) ? d : dmax;
            wmax = fabs((double)want[i]) > wmax ? fabs((double)want[i]) : wmax;
        }
        const double err = dmax / (wmax > ERR_FLOOR ? wmax : ERR_FLOOR);
        const double ratio = tol > 0 ? err / tol : err;
        if (!(ratio <= res->oracle_error)) res->oracle_error = ratio;
        if (!(err <= tol)) {
            brg_ck_fail(k, "%s output %d differs between %s and the oracle %s by %.3g (tolerance %.3g)", opname, o,
                        brg_device_name(k->dev), brg_device_name(od), err, tol);
            brg_ck_blame(k, "oracle");
        }
    }
    for (int i = 0; i < snap->n; i++)
        if (mem[i]) brg_device_free(od, mem[i]);
}

/* Run op on the device, then check guards and inputs. With explicit_ws the
 * workspace the device asks for is allocated here, guarded and poisoned
 * (which also checks that the size it declares is enough); otherwise the
 * device takes it from its arena itself. The op's outputs are no longer
 * mirrored afterwards. */
void brg_ck_run(ck *k, brg_op *op, int explicit_ws)
{
    if (!ck_ok(k)) return;
    const char *opname = brg_op_kind_name(op->kind);
    void *ws = NULL;
    int64_t ws_floats = 0;
    if (explicit_ws) {
        size_t bytes = 0;
        brg_status st = brg_device_workspace_bytes(k->dev, op, &bytes);
        if (st != BRG_OK) {
            ck_call_failed(k, st, opname);
            return;
        }
        if (bytes > 0) {
            ws_floats = (int64_t)((bytes + 3) / 4);
            st = brg_device_alloc(k->dev, (size_t)(ws_floats + 2 * GUARD) * 4, "check workspace", &ws);
            if (st != BRG_OK) {
                ck_call_failed(k, st, "allocating a check workspace");
                return;
            }
            ck_guard_block(k, ws, ws_floats, WORKSPACE_ID);
            op->workspace = (float *)ws + GUARD;
            op->workspace_bytes = bytes;
        }
    }
    oracle_snap snap = {0};
    const int twin = twin_block(k, op);
    if ((k->opt.oracle || twin) && ck_ok(k)) oracle_before(k, op, &snap);
    if (ck_ok(k)) {
        brg_status st = brg_device_run(k->dev, op);
        if (st == BRG_OK) st = brg_device_synchronize(k->dev);
        if (st != BRG_OK) ck_call_failed(k, st, opname);
    }
    if (k->opt.oracle && ck_ok(k)) oracle_after(k, op, &snap, k->opt.oracle, 0);
    if (twin && ck_ok(k)) {
        oracle_after(k, op, &snap, k->dev, twin);
        k->res->blocked_twins++;
    }
    for (int j = 0; j < op->n_out; j++) {
        ck_tensor *t = op->out[j] ? ck_find(k, op->out[j]) : NULL;
        if (t) t->mirrored = 0;
    }
    ck_check_guards(k, opname);
    ck_check_inputs(k, op, opname);
    if (ws) {
        int side = 0;
        if (ck_ok(k) && !ck_guard_intact(k, ws, ws_floats, WORKSPACE_ID, &side) && ck_ok(k)) {
            brg_ck_fail(k, "%s wrote outside the %zu bytes of workspace it asked for", opname, op->workspace_bytes);
            brg_ck_blame(k, "workspace guard");
        }
        brg_device_free(k->dev, ws);
        op->workspace = NULL;
        op->workspace_bytes = 0;
    }
}

/* ---- comparisons ---- */

/* Relative error of got against want at the given indices (all if idx is
 * NULL): max |got - want| / max(max |want|, scale, ERR_FLOOR). scale is the
 * magnitude of the terms the values were computed from (0 if not known):
 * float rounding is relative to it, not to a result that cancelled to
 * nearly nothing. Infinite if got has a NaN or an infinity. */
static double rel_error(const float *got, const double *want, const int64_t *idx, int64_t n, double scale)
{
    double maxdiff = 0.0, maxref = 0.0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = idx ? idx[i] : i;
        double g = got[j];
        if (!isfinite(g)) return INFINITY;
        double d = fabs(g - want[j]);
        if (d > maxdiff) maxdiff = d;
        if (fabs(want[j]) > maxref) maxref = fabs(want[j]);
    }
    if (scale > maxref) maxref = scale;
    return maxdiff / (maxref > ERR_FLOOR ? maxref : ERR_FLOOR);
}

/* Fault injection (brg_check_options): move element 0 of got once per kind. */
void brg_ck_inject(ck *k, int which, float *got, const double *want, int64_t n)
{
    double amount = which == WHICH_FWD ? k->opt.inject_forward
                    : which == WHICH_BWD ? k->opt.inject_backward
                                         : k->opt.inject_accumulate;
    if (!(amount > 0.0) || k->injected[which] || n < 1) return;
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    got[0] = (float)(got[0] + amount * (scale > 1.0 ? scale : 1.0));
    k->injected[which] = 1;
}

/* Fold one tensor's error into the result. */
void brg_ck_record(ck *k, int which, const char *name, double err)
{
    brg_check_result *res = k->res;
    double tol = which == WHICH_FWD ? res->forward_tol : which == WHICH_BWD ? res->backward_tol : res->accumulate_tol;
    double *slot = which == WHICH_FWD ? &res->forward_error
                   : which == WHICH_BWD ? &res->backward_error
                                        : &res->accumulate_error;
    if (!(err <= *slot)) *slot = err;
    static const char *const suffix[3] = {"", "", " (accumulate)"};
    double ratio = tol > 0 ? err / tol : err;
    if (!(ratio <= k->worst_ratio) && !k->worst_locked) {
        k->worst_ratio = ratio;
        snprintf(res->worst, sizeof res->worst, "%s%s", name, suffix[which]);
    }
    if (!(err <= tol)) {
        static const char *const against[3] = {"the reference", "finite differences",
                                                "prefill + gradient"};
        if (isinf(err) || isnan(err))
            brg_ck_fail(k, "'%s'%s has NaN or infinite elements (outputs are NaN-poisoned before a run: unwritten?)",
                        name, suffix[which]);
        else
            brg_ck_fail(k, "'%s'%s differs from %s by %.3g (tolerance %.3g)", name, suffix[which], against[which], err,
                        tol);
    }
}

/* Download an output and compare it with want (scale: see rel_error). */
void brg_ck_compare(ck *k, int which, ck_tensor *t, const double *want, double scale)
{
    brg_ck_download(k, t);
    if (!ck_ok(k)) return;
    brg_ck_inject(k, which, t->host, want, t->numel);
    brg_ck_record(k, which, t->name, rel_error(t->host, want, NULL, t->numel, scale));
}

void brg_ck_compare_i32(ck *k, int which, ck_tensor *t, const int32_t *want)
{
    brg_ck_download(k, t);
    if (!ck_ok(k)) return;
    int32_t *got = t->host;
    double amount = which == WHICH_FWD ? k->opt.inject_forward
                    : which == WHICH_BWD ? k->opt.inject_backward
                                         : k->opt.inject_accumulate;
    if (amount > 0.0 && !k->injected[which] && t->numel > 0) {
        got[0] += (int32_t)ceil(amount);
        k->injected[which] = 1;
    }
    double err = 0.0;
    for (int64_t i = 0; i < t->numel; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (d > err) err = d;
    }
    brg_ck_record(k, which, t->name, err);
}

/* ---- the reference model ---- */

/* Evaluate the reference forward at the current double inputs into
 * k->yref; returns the loss for softmax_xent, 0 otherwise. */
double brg_ck_ref_eval(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    int64_t hw = c->ndim == 4 ? s[2] * s[3] : 1;
    switch (c->family) {
    case BRG_CHECK_CONV2D:
        brg_ref_conv2d_forward(&k->g, c->out_features, k->x->ref, k->w->ref, k->b ? k->b->ref : NULL, k->yref);
        return 0.0;
    case BRG_CHECK_LINEAR:
        brg_ref_linear_forward(s[0], k->x->numel / s[0], c->out_features, k->x->ref, k->w->ref,
                               k->b ? k->b->ref : NULL, k->yref);
        return 0.0;
    case BRG_CHECK_BATCHNORM_TRAIN:
    case BRG_CHECK_BATCHNORM_SYNC: /* one replica: the training forward */
        brg_ref_batchnorm_train(s[0], s[1], hw, k->x->ref, k->gamma ? k->gamma->ref : NULL,
                                k->beta ? k->beta->ref : NULL, (double)c->epsilon, k->yref, k->stats[0], k->stats[1],
                                k->stats[2]);
        return 0.0;
    case BRG_CHECK_BATCHNORM_INFER:
        brg_ref_batchnorm_infer(s[0], s[1], hw, k->x->ref, k->gamma ? k->gamma->ref : NULL,
                                k->beta ? k->beta->ref : NULL, k->rmean->ref, k->rvar->ref, (double)c->epsilon,
                                k->yref);
        return 0.0;
    case BRG_CHECK_RELU: brg_ref_relu_forward(k->x->numel, k->x->ref, k->yref); return 0.0;
    case BRG_CHECK_MAXPOOL: brg_ref_maxpool_forward(&k->g, k->x->ref, k->yref); return 0.0;
    case BRG_CHECK_AVGPOOL: brg_ref_avgpool_forward(&k->g, c->count_include_pad, k->x->ref, k->yref); return 0.0;
    case BRG_CHECK_GLOBAL_AVGPOOL: brg_ref_global_avgpool_forward(s[0], s[1], hw, k->x->ref, k->yref); return 0.0;
    case BRG_CHECK_CONCAT: {
        const double *xs[BRG_CHECK_MAX_PARTS];
        for (int p = 0; p < c->n_parts; p++) xs[p] = k->parts[p]->ref;
        brg_ref_concat_forward(s[0], hw, c->n_parts, c->part_channels, xs, k->yref);
        return 0.0;
    }
    case BRG_CHECK_ADD: brg_ref_add_forward(k->x->numel, k->x->ref, k->a2->ref, k->yref); return 0.0;
    case BRG_CHECK_DROPOUT:
        brg_ref_dropout_forward(k->x->numel, c->rate, k->dropout_seed, c->dropout_offset, k->x->ref, k->yref);
        return 0.0;
    case BRG_CHECK_SOFTMAX_XENT:
        return brg_ref_softmax_xent_forward(s[0], s[1], hw, k->x->ref, k->labels, c->ignore_label, k->yref);
    case BRG_CHECK_UPSAMPLE:
        brg_ref_upsample_forward(s[0], s[1], s[2], s[3], c->factor, k->x->ref, k->yref);
        return 0.0;
    default: return 0.0;
    }
}

/* The scalar whose gradient the backward ops compute: sum(dy * y), or the
 * mean loss itself. */
static double ref_loss(ck *k)
{
    double v = brg_ck_ref_eval(k);
    if (k->c.family == BRG_CHECK_SOFTMAX_XENT) return v;
    double acc = 0.0;
    for (int64_t i = 0; i < k->ny; i++) acc += k->dy->ref[i] * k->yref[i];
    return acc;
}

/* The magnitude model: every float tensor's values replaced by their
 * absolute values (dy included), the output going to k->yabs. For the
 * families whose outputs and gradients are sums of products (conv, linear,
 * the average pools, upsampling), the model's outputs, and its gradients by finite
 * differences, are the sums of the magnitudes of the terms: the scale float
 * rounding error is proportional to. on = 1 enters it, 0 leaves it. */
static void ck_abs_mode(ck *k, int on)
{
    for (int i = 0; i < k->n_tens; i++) {
        ck_tensor *t = k->tens[i];
        if (!t->ref) continue;
        if (on) {
            if (!t->absref) t->absref = brg_ck_host(k, (size_t)t->numel, sizeof(double));
            if (!t->absref) return;
            for (int64_t e = 0; e < t->numel; e++) t->absref[e] = fabs(t->ref[e]);
        }
        double *tmp = t->ref;
        t->ref = t->absref;
        t->absref = tmp;
    }
    double *tmp = k->yref;
    k->yref = k->yabs;
    k->yabs = tmp;
}

static int family_sums(brg_check_family f)
{
    return f == BRG_CHECK_CONV2D || f == BRG_CHECK_LINEAR || f == BRG_CHECK_AVGPOOL || f == BRG_CHECK_GLOBAL_AVGPOOL ||
           f == BRG_CHECK_UPSAMPLE;
}

/* The largest output of the magnitude model (0 for families without sums). */
static double ck_forward_scale(ck *k)
{
    if (!family_sums(k->c.family) || !ck_ok(k) || !k->yabs) return 0.0;
    ck_abs_mode(k, 1);
    if (!ck_ok(k)) return 0.0;
    brg_ck_ref_eval(k);
    ck_abs_mode(k, 0);
    double m = 0.0;
    for (int64_t i = 0; i < k->ny; i++)
        if (k->yabs[i] > m) m = k->yabs[i];
    return m;
}

/* Run a forward op whose output is y and compare y with the reference at
 * the current inputs, measured against the magnitude model where the family
 * has one (ck_forward_scale). */
void brg_ck_forward(ck *k, brg_op *op, ck_tensor *y)
{
    brg_ck_run(k, op, 1);
    brg_ck_ref_eval(k);
    double scale = ck_forward_scale(k);
    brg_ck_compare(k, WHICH_FWD, y, k->yref, scale);
}

/* Central difference of ref_loss with respect to element j of param
 * (divided by the step actually taken, xp - xm, in double). */
static double fd_at(ck *k, ck_tensor *param, int64_t j)
{
    double x0 = param->ref[j];
    double xp = x0 + FD_STEP, xm = x0 - FD_STEP;
    param->ref[j] = xp;
    double lp = ref_loss(k);
    param->ref[j] = xm;
    double lm = ref_loss(k);
    param->ref[j] = x0;
    return (lp - lm) / (xp - xm);
}

/* Compare the downloaded gradient grad with central differences of
 * ref_loss with respect to param, at up to fd_max elements. scale is a
 * magnitude known to the caller (0 if none); for the families with sums the
 * magnitude model's gradient at the same elements is used as well. */
static void ck_fd(ck *k, ck_tensor *grad, ck_tensor *param, double scale)
{
    if (!ck_ok(k)) return;
    int64_t n = param->numel;
    int64_t m = k->opt.fd_max_elements == 0 ? FD_DEFAULT : k->opt.fd_max_elements < 0 ? n : k->opt.fd_max_elements;
    if (m > n) m = n;
    if (m < 2 && n >= 2) m = 2;
    int64_t *idx = brg_ck_host(k, (size_t)n, sizeof *idx);
    double *fd = brg_ck_host(k, (size_t)n, sizeof *fd);
    if (!ck_ok(k)) return;
    /* The first and last element always (edges are where index bugs live),
     * the rest a random choice without repetition. */
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    if (m < n) {
        idx[1] = n - 1;
        idx[n - 1] = 1;
        for (int64_t i = 2; i < m; i++) {
            int64_t j = rng_int(&k->rng, i, n - 1);
            int64_t tmp = idx[i];
            idx[i] = idx[j];
            idx[j] = tmp;
        }
    }
    for (int64_t i = 0; i < m; i++) {
        fd[idx[i]] = fd_at(k, param, idx[i]);
        k->res->fd_points++;
    }
    if (family_sums(k->c.family) && k->yabs) {
        ck_abs_mode(k, 1);
        for (int64_t i = 0; i < m && ck_ok(k); i++) {
            double g = fabs(fd_at(k, param, idx[i]));
            if (g > scale) scale = g;
            k->res->fd_points++;
        }
        ck_abs_mode(k, 0);
    }
    brg_ck_inject(k, WHICH_BWD, grad->host, fd, 1);
    brg_ck_record(k, WHICH_BWD, grad->name, rel_error(grad->host, fd, idx, m, scale));
}

/* Run a backward op whose outputs are grads[0..n) (NULL entries are absent
 * outputs), compare each with finite differences with respect to
 * params[i] (or, where want[i] is given, with that exact gradient), then
 * run it again with accumulate = 1 over a random prefill. scales[i] (or
 * NULL) are magnitudes of the gradients' terms known to the caller. */
void brg_ck_backward(ck *k, brg_op *op, ck_tensor **grads, ck_tensor **params, double **want,
                     const double *scales, int n)
{
    for (int i = 0; i < n; i++) ck_poison(k, grads[i]);
    brg_ck_run(k, op, 1);
    for (int i = 0; i < n && ck_ok(k); i++) {
        if (!grads[i]) continue;
        brg_ck_download(k, grads[i]);
        if (!ck_ok(k)) return;
        if (want && want[i]) {
            brg_ck_inject(k, WHICH_BWD, grads[i]->host, want[i], grads[i]->numel);
            brg_ck_record(k, WHICH_BWD, grads[i]->name,
                          rel_error(grads[i]->host, want[i], NULL, grads[i]->numel, scales ? scales[i] : 0.0));
        } else {
            ck_fd(k, grads[i], params[i], scales ? scales[i] : 0.0);
        }
    }
    /* accumulate: out = prefill + gradient, each measured against the
     * larger of the two terms */
    double *expect[BRG_OP_MAX_TENSORS] = {0};
    double acc_scale[BRG_OP_MAX_TENSORS] = {0};
    for (int i = 0; i < n && ck_ok(k); i++) {
        ck_tensor *g = grads[i];
        if (!g) continue;
        expect[i] = brg_ck_host(k, (size_t)g->numel, sizeof(double));
        if (!expect[i]) return;
        float *gh = g->host;
        for (int64_t e = 0; e < g->numel; e++) {
            float pre = (float)(2.0 * rng_unit(&k->rng) - 1.0);
            expect[i][e] = (double)pre + (double)gh[e];
            double mag = fabs((double)pre) > fabs((double)gh[e]) ? fabs((double)pre) : fabs((double)gh[e]);
            if (mag > acc_scale[i]) acc_scale[i] = mag;
            gh[e] = pre;
        }
        brg_ck_upload(k, g);
    }
    brg_op acc = *op;
    acc.accumulate = 1;
    brg_ck_run(k, &acc, 0);
    for (int i = 0; i < n && ck_ok(k); i++) {
        if (!grads[i]) continue;
        brg_ck_download(k, grads[i]);
        if (!ck_ok(k)) return;
        brg_ck_inject(k, WHICH_ACC, grads[i]->host, expect[i], grads[i]->numel);
        brg_ck_record(k, WHICH_ACC, grads[i]->name,
                      rel_error(grads[i]->host, expect[i], NULL, grads[i]->numel, acc_scale[i]));
    }
}

void brg_ck_op_set(brg_op *op, brg_op_kind kind, int n_in, const ck_tensor *const *in, int n_out,
                   const ck_tensor *const *out)
{
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->n_in = n_in;
    op->n_out = n_out;
    for (int i = 0; i < n_in; i++) op->in[i] = in[i] ? &in[i]->t : NULL;
    for (int i = 0; i < n_out; i++) op->out[i] = out[i] ? &out[i]->t : NULL;
}


/* Allocate the reference output and the dy of the loss (shape of the
 * forward output); dy is drawn only when the family has a backward. */
void brg_ck_model_output(ck *k, int ndim, const int64_t *shape, int with_dy)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    k->ny = n;
    k->yref = brg_ck_host(k, (size_t)n, sizeof(double));
    if (family_sums(k->c.family)) k->yabs = brg_ck_host(k, (size_t)n, sizeof(double));
    if (with_dy) k->dy = brg_ck_input(k, "dy", ndim, shape, FILL_UNIFORM);
}

/* Check the backward op of the given kind whose one output is dx, the
 * gradient with respect to k->x, against finite differences. It reads
 * in[0..n_in) and takes the parameters of the forward op fwd. */
void brg_ck_backward_dx(ck *k, const brg_op *fwd, brg_op_kind kind, const ck_tensor *const *in, int n_in)
{
    ck_tensor *dx = brg_ck_output(k, "dx", k->x->ndim, k->x->shape);
    const ck_tensor *out[1] = {dx};
    brg_op op;
    brg_ck_op_set(&op, kind, n_in, in, 1, out);
    op.p = fwd->p;
    ck_tensor *g[1] = {dx}, *p[1] = {k->x};
    brg_ck_backward(k, &op, g, p, NULL, NULL, 1);
}

/* The kernel check harness's private declarations (check/): the run
 * context every part shares, its random numbers, and the steps the op
 * families are written in. check.c runs a case (guarded device tensors,
 * the reference model, comparisons, finite differences); cases.c holds
 * the families' tolerances and the cases themselves; families.c one
 * function per op family, built from the steps declared here. */
#ifndef BRIGADE_CHECK_IMPL_H
#define BRIGADE_CHECK_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "backends/ref/ref-kernels.h"
#include "brigade/check.h"
#include "brigade/ops.h"
#include "base/internal.h"
#include "base/rng.h"

#define GUARD 64                  /* floats on each side: 256 bytes, keeps data aligned */
#define POISON_CHUNK 4096         /* floats of POISON written per copy */
#define POISON 0x7fc0dea1u        /* a quiet NaN with a recognisable payload: unwritten outputs */
#define WORKSPACE_ID 0x3fff       /* guard id of the workspace block */
#define FD_DEFAULT 64             /* finite differences per gradient tensor */
#define FD_STEP 1e-4              /* step of the central differences: inputs are O(1), and max-pool
                                   * inputs are 0.01 apart, so no step crosses a kink */
#define ERR_FLOOR 1e-6            /* smallest denominator of a relative error */
#define CK_MAX_TENSORS 48
#define CK_MAX_NUMEL ((int64_t)1 << 22)


/* ---- random numbers: splitmix64 over a counter ---- */

typedef struct ck_rng {
    uint64_t s;
} ck_rng;

static inline uint64_t rng_next(ck_rng *r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return brg_splitmix64(r->s);
}

/* Uniform in [0, 1). */
static inline double rng_unit(ck_rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

/* Uniform integer in [lo, hi]. */
static inline int64_t rng_int(ck_rng *r, int64_t lo, int64_t hi)
{
    if (hi <= lo) return lo;
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

typedef struct ck_tensor {
    char name[32];
    brg_dtype dtype;
    int ndim;
    int64_t shape[4];
    int64_t numel;
    void *host;       /* numel elements: what the device tensor holds when mirrored */
    double *ref;      /* float tensors: the values as doubles (inputs; perturbed by FD) */
    double *absref;   /* |ref|, swapped in for the magnitude model (see ck_abs_mode) */
    int mirrored;     /* 1 if host equals the device contents */
    void *mem;        /* device block: guard, data, guard */
    brg_tensor t;     /* the view on the data */
} ck_tensor;

typedef struct ck {
    brg_device *dev;
    brg_check_case c;
    brg_check_options opt;
    brg_check_result *res;
    ck_rng rng;
    ck_tensor *tens[CK_MAX_TENSORS];
    int n_tens;
    void **host;         /* every host allocation of the run, freed at its end */
    size_t n_host, cap_host;
    brg_status st;       /* first call that failed to run */
    double worst_ratio;  /* worst error / tolerance seen */
    int worst_locked;    /* res->worst names a non-numeric failure (guard, input, leak) */
    int injected[3];
    float *poison;       /* POISON_CHUNK floats of POISON */

    /* The reference model: the inputs of the forward, the dy of the loss,
     * the scratch output. */
    brg_ref_window g;
    ck_tensor *x, *w, *b, *gamma, *beta, *rmean, *rvar, *a2, *parts[BRG_CHECK_MAX_PARTS];
    int32_t *labels;
    ck_tensor *dy;
    double *yref;       /* reference output of the current inputs */
    double *yabs;       /* the magnitude model's output (see ck_abs_mode) */
    int64_t ny;
    double *stats[3];   /* batch norm: mean, biased var, invstd */
    uint64_t dropout_seed;
} ck;

enum { WHICH_FWD = 0, WHICH_BWD = 1, WHICH_ACC = 2 };

static inline int ck_ok(const ck *k) { return k->st == BRG_OK; }

enum fill_kind {
    FILL_SIGNED,   /* +-[0.1, 1]: away from zero, so ReLU kinks are out of FD reach */
    FILL_UNIFORM,  /* [-1, 1] */
    FILL_DISTINCT, /* a shuffled grid with spacing 0.01: max pool windows have one clear winner */
    FILL_TIES,     /* negative values from a set of three: ties everywhere, padding must not win */
    FILL_SHIFTED,  /* 0.3 + [-1, 1]: batch norm input with a non-zero mean */
    FILL_FAR,      /* 1000 + [-1, 1]: batch norm input far from zero next to its spread */
    FILL_POSITIVE, /* [0.5, 1.5]: variances */
    FILL_LOGITS,   /* [-3, 3] */
};

/* Compact tensor lists that drop trailing absent optional tensors. */
static inline int trim(const ck_tensor *const *list, int n)
{
    while (n > 0 && !list[n - 1]) n--;
    return n;
}

/* ---- cases (cases.c) ---- */

/* Fill in the defaults of a case (see brigade/check.h) into *out. */
void brg_check_normalize_case(const brg_check_case *in, brg_check_case *out);
int64_t brg_check_case_numel(const brg_check_case *c);
/* BRG_OK if the normalised case can run; otherwise a message saying why. */
brg_status brg_check_validate_case(const brg_check_case *c);

/* ---- the steps of a run (check.c) ---- */

/* A host allocation owned by the run. NULL (and k->st set) on failure. */
void *brg_ck_host(ck *k, size_t count, size_t size);

/* Record the first failure message of the case. */
void brg_ck_fail(ck *k, const char *fmt, ...) BRG_PRINTF(2, 3);

void brg_ck_blame(ck *k, const char *fmt, ...) BRG_PRINTF(2, 3);

/* A device tensor with guard bands, poisoned, and its host mirror. */
ck_tensor *brg_ck_tensor_new(ck *k, const char *name, brg_dtype dtype, int ndim, const int64_t *shape);

void brg_ck_upload(ck *k, ck_tensor *t);

void brg_ck_download(ck *k, ck_tensor *t);

/* A float input tensor filled with kind; NULL if absent or on failure. */
ck_tensor *brg_ck_input(ck *k, const char *name, int ndim, const int64_t *shape, enum fill_kind kind);

ck_tensor *brg_ck_vector(ck *k, const char *name, int64_t n, enum fill_kind kind);

ck_tensor *brg_ck_output(ck *k, const char *name, int ndim, const int64_t *shape);

/* Run op on the device, then check guards and inputs. With explicit_ws the
 * workspace the device asks for is allocated here, guarded and poisoned
 * (which also checks that the size it declares is enough); otherwise the
 * device takes it from its arena itself. The op's outputs are no longer
 * mirrored afterwards. */
void brg_ck_run(ck *k, brg_op *op, int explicit_ws);

/* Fault injection (brg_check_options): move element 0 of got once per kind. */
void brg_ck_inject(ck *k, int which, float *got, const double *want, int64_t n);

/* Fold one tensor's error into the result. */
void brg_ck_record(ck *k, int which, const char *name, double err);

/* Download an output and compare it with want (scale: see rel_error). */
void brg_ck_compare(ck *k, int which, ck_tensor *t, const double *want, double scale);

/* Download an int32 output and compare it exactly with want: the error
 * recorded is the largest absolute difference (fault injection moves
 * element 0 by at least 1). */
void brg_ck_compare_i32(ck *k, int which, ck_tensor *t, const int32_t *want);

/* Evaluate the reference forward at the current double inputs into
 * k->yref; returns the loss for softmax_xent, 0 otherwise. */
double brg_ck_ref_eval(ck *k);

/* Run a forward op whose output is y and compare y with the reference at
 * the current inputs, measured against the magnitude model where the family
 * has one (ck_forward_scale). */
void brg_ck_forward(ck *k, brg_op *op, ck_tensor *y);

/* Run a backward op whose outputs are grads[0..n) (NULL entries are absent
 * outputs), compare each with finite differences with respect to
 * params[i] (or, where want[i] is given, with that exact gradient), then
 * run it again with accumulate = 1 over a random prefill. scales[i] (or
 * NULL) are magnitudes of the gradients' terms known to the caller. */
void brg_ck_backward(ck *k, brg_op *op, ck_tensor **grads, ck_tensor **params, double **want,
                     const double *scales, int n);

void brg_ck_op_set(brg_op *op, brg_op_kind kind, int n_in, const ck_tensor *const *in, int n_out,
                   const ck_tensor *const *out);

/* Allocate the reference output and the dy of the loss (shape of the
 * forward output); dy is drawn only when the family has a backward. */
void brg_ck_model_output(ck *k, int ndim, const int64_t *shape, int with_dy);

/* Check the backward op of the given kind whose one output is dx, the
 * gradient with respect to k->x, against finite differences. It reads
 * in[0..n_in) and takes the parameters of the forward op fwd. */
void brg_ck_backward_dx(ck *k, const brg_op *fwd, brg_op_kind kind, const ck_tensor *const *in, int n_in);

/* ---- the families (families.c) ---- */

/* Run the case's family: its forward, backwards and accumulation checks. */
void brg_ck_run_family(ck *k);

#endif /* BRIGADE_CHECK_IMPL_H */

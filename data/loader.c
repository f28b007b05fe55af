/* A pool of threads filling batches ahead of the caller (see
 * include/brigade/loader.h).
 *
 * A pass is a sequence of positions 0..count-1; position p belongs to batch
 * p / batch and is sample order[p]. Batch b lives in slot b % slots
 * (slots = depth + 1). The workers claim positions one at a time, in order,
 * but only of batches before held + depth, where held is the batch the
 * caller will get next, so the slot of the batch the caller reads (held - 1)
 * is never written meanwhile. A batch is ready when all its positions are
 * written. One mutex guards the counters; the reads run outside it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/internal.h"
#include "base/rng.h"
#include "brigade/loader.h"

typedef struct slot {
    float *images;
    int32_t *labels;
    int64_t written; /* positions of the slot's batch written so far */
} slot;

struct brg_loader {
    brg_sample_source src;
    int64_t labels;        /* per sample: src.label_count, at least 1 */
    int64_t batch;
    int threads, depth, slots;
    brg_device *host_dev;  /* the batches' memory is its brg_device_host_alloc's (NULL: malloc) */
    slot *slot;
    pthread_t *thread;
    int started;           /* threads running */

    pthread_mutex_t lock;
    pthread_cond_t work;   /* workers wait for positions to claim */
    pthread_cond_t ready;  /* the caller waits for its batch; start waits for reads in flight */
    int64_t *order;        /* this pass's order (NULL: identity) */
    int64_t count;         /* positions in the pass */
    uint64_t seed;
    int64_t next_pos;      /* the next position to claim */
    int64_t held;          /* the batch the caller holds or waits for */
    int64_t in_flight;     /* reads claimed and not yet counted */
    int stop;              /* destroy: workers leave */
    brg_status error;      /* the first failure of the pass */
    char message[1024];
    int64_t error_batch;
};

uint64_t brg_loader_sample_seed(uint64_t seed, int64_t index)
{
    return brg_splitmix64(seed ^ brg_splitmix64((uint64_t)index));
}

brg_loader_options brg_loader_options_init(void)
{
    brg_loader_options o = {1, 2, NULL};
    return o;
}

static int64_t batches_of(const brg_loader *l) { return (l->count + l->batch - 1) / l->batch; }

static int64_t batch_size(const brg_loader *l, int64_t b)
{
    const int64_t left = l->count - b * l->batch;
    return left < l->batch ? left : l->batch;
}

/* Make position p into its slot. Called without the lock. */
static brg_status make(brg_loader *l, int64_t p)
{
    const int64_t b = p / l->batch, k = p % l->batch;
    slot *s = &l->slot[b % l->slots];
    const int64_t index = l->order ? l->order[p] : p;
    if (index < 0 || index >= l->src.count)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "loader: position %lld of the order is sample %lld, outside 0..%lld",
                         (long long)p, (long long)index, (long long)l->src.count - 1);
    return l->src.read(l->src.ctx, index, brg_loader_sample_seed(l->seed, index), s->images + k * l->src.sample_floats,
                       s->labels + k * l->labels);
}

/* With the lock held: whether position next_pos may be claimed. */
static int claimable(const brg_loader *l)
{
    return l->next_pos < l->count && l->error == BRG_OK && l->next_pos / l->batch < l->held + l->depth;
}

/* Count position p as done (or failed) under the lock. */
static void finish(brg_loader *l, int64_t p, brg_status st)
{
    const int64_t b = p / l->batch;
    if (st != BRG_OK && (l->error == BRG_OK || b < l->error_batch)) {
        l->error = st;
        l->error_batch = b;
        snprintf(l->message, sizeof l->message, "%s", brg_last_error());
    }
    l->slot[b % l->slots].written++;
    l->in_flight--;
    pthread_cond_broadcast(&l->ready);
}

static void *worker(void *arg)
{
    brg_loader *l = arg;
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->stop && !claimable(l)) pthread_cond_wait(&l->work, &l->lock);
        if (l->stop) break;
        const int64_t p = l->next_pos++;
        l->in_flight++;
        pthread_mutex_unlock(&l->lock);
        const brg_status st = make(l, p);
        pthread_mutex_lock(&l->lock);
        finish(l, p, st);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* A batch's buffer: from the options' device (pinned for CUDA) or
 * malloc. NULL when out of memory. */
static void *host_alloc(const brg_loader *l, size_t bytes)
{
    if (!l->host_dev) return malloc(bytes ? bytes : 1);
    void *p = NULL;
    return brg_device_host_alloc(l->host_dev, bytes, &p) == BRG_OK ? p : NULL;
}

static void host_free(const brg_loader *l, void *p)
{
    if (l->host_dev) brg_device_host_free(l->host_dev, p);
    else free(p);
}

brg_status brg_loader_create(const brg_sample_source *src, int64_t batch, const brg_loader_options *options,
                             brg_loader **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_loader_create: out is NULL");
    *out = NULL;
    const brg_loader_options o = options ? *options : brg_loader_options_init();
    if (!src || !src->read || src->count < 0 || src->sample_floats <= 0 || src->label_count < 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_loader_create: the source needs a read function, a count "
                                                   ">= 0, sample_floats > 0 and label_count >= 0");
    if (batch <= 0 || o.threads < 0 || o.threads > 1024 || o.depth < 1 || o.depth > 1024)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_loader_create: batch %lld, threads %d, depth %d (need batch >= 1, threads 0..1024, "
                         "depth 1..1024)", (long long)batch, o.threads, o.depth);
    brg_loader *l = calloc(1, sizeof *l);
    if (!l) return brg_error(BRG_ERR_HOST_MEMORY, "loader: out of host memory");
    l->src = *src;
    l->labels = src->label_count > 1 ? src->label_count : 1;
    l->batch = batch;
    l->threads = o.threads;
    l->depth = o.threads ? o.depth : 0;
    l->slots = l->depth + 1;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->ready, NULL);
    l->slot = calloc((size_t)l->slots, sizeof *l->slot);
    l->thread = calloc((size_t)(l->threads ? l->threads : 1), sizeof *l->thread);
    if (!l->slot || !l->thread) goto nomem;
    l->host_dev = o.host_memory_of;
    for (int s = 0; s < l->slots; s++) {
        l->slot[s].images = host_alloc(l, (size_t)(batch * src->sample_floats) * sizeof(float));
        l->slot[s].labels = host_alloc(l, (size_t)(batch * l->labels) * sizeof(int32_t));
        if (!l->slot[s].images || !l->slot[s].labels) goto nomem;
    }
    for (int t = 0; t < l->threads; t++) {
        if (pthread_create(&l->thread[t], NULL, worker, l) != 0) {
            brg_loader_destroy(l);
            return brg_error(BRG_ERR_HOST_MEMORY, "loader: cannot start worker thread %d of %d", t + 1, o.threads);
        }
        l->started++;
    }
    *out = l;
    return BRG_OK;
nomem:
    brg_loader_destroy(l);
    return brg_error(BRG_ERR_HOST_MEMORY, "loader: out of host memory for %d batches of %lld samples of %lld floats",
                     o.depth + 1, (long long)batch, (long long)src->sample_floats);
}

void brg_loader_destroy(brg_loader *l)
{
    if (!l) return;
    pthread_mutex_lock(&l->lock);
    l->stop = 1;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->lock);
    for (int t = 0; t < l->started; t++) pthread_join(l->thread[t], NULL);
    for (int s = 0; l->slot && s < l->slots; s++) {
        host_free(l, l->slot[s].images);
        host_free(l, l->slot[s].labels);
    }
    pthread_cond_destroy(&l->ready);
    pthread_cond_destroy(&l->work);
    pthread_mutex_destroy(&l->lock);
    free(l->slot);
    free(l->thread);
    free(l->order);
    free(l);
}

brg_status brg_loader_start(brg_loader *l, const int64_t *order, int64_t count, int64_t first_batch, uint64_t seed)
{
    if (!l) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_loader_start: loader is NULL");
    if (count < 0 || (!order && count > l->src.count) || first_batch < 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_loader_start: count %lld (source: %lld samples), first batch %lld", (long long)count,
                         (long long)l->src.count, (long long)first_batch);
    int64_t *copy = NULL;
    if (order && count > 0) {
        copy = malloc((size_t)count * sizeof *copy);
        if (!copy) return brg_error(BRG_ERR_HOST_MEMORY, "loader: out of host memory for an order of %lld samples",
                                    (long long)count);
        memcpy(copy, order, (size_t)count * sizeof *copy);
    }
    pthread_mutex_lock(&l->lock);
    l->next_pos = l->count; /* nothing more is claimed while the reads in flight finish */
    while (l->in_flight > 0) pthread_cond_wait(&l->ready, &l->lock);
    free(l->order);
    l->order = copy;
    l->count = count;
    l->seed = seed;
    l->held = first_batch;
    l->next_pos = first_batch * l->batch < count ? first_batch * l->batch : count;
    l->error = BRG_OK;
    l->message[0] = '\0';
    for (int s = 0; s < l->slots; s++) l->slot[s].written = 0;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->lock);
    return BRG_OK;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* threads 0: make batch b here. */
static brg_status make_here(brg_loader *l, int64_t b)
{
    const int64_t n = batch_size(l, b);
    for (int64_t k = 0; k < n; k++) {
        const brg_status st = make(l, b * l->batch + k);
        if (st != BRG_OK) return st;
    }
    l->next_pos = b * l->batch + n;
    return BRG_OK;
}

brg_status brg_loader_next(brg_loader *l, const float **images, const int32_t **labels, int64_t *n, double *waited)
{
    if (!l || !images || !labels || !n) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_loader_next: NULL argument");
    *images = NULL;
    *labels = NULL;
    *n = 0;
    if (waited) *waited = 0.0;
    const double t0 = now();
    pthread_mutex_lock(&l->lock);
    /* The batch handed out last time is free again. No worker can write
     * into its slot before held moves past b (see claimable), so the
     * counter is reset before anyone counts into it. */
    const int64_t b = l->held;
    if (b > 0) l->slot[(b - 1) % l->slots].written = 0;
    if (b >= batches_of(l) || (l->error != BRG_OK && l->error_batch < b)) {
        pthread_mutex_unlock(&l->lock);
        return BRG_OK;
    }
    brg_status st = BRG_OK;
    slot *s = &l->slot[b % l->slots];
    const int64_t size = batch_size(l, b);
    if (l->threads == 0) {
        pthread_mutex_unlock(&l->lock);
        st = make_here(l, b);
        pthread_mutex_lock(&l->lock);
        if (st != BRG_OK) {
            l->error = st;
            l->error_batch = b;
            snprintf(l->message, sizeof l->message, "%s", brg_last_error());
        }
    } else {
        while (s->written < size && !(l->error != BRG_OK && l->error_batch <= b && l->in_flight == 0))
            pthread_cond_wait(&l->ready, &l->lock);
        if (l->error != BRG_OK && l->error_batch <= b) st = l->error;
    }
    if (st != BRG_OK) {
        char message[sizeof l->message];
        snprintf(message, sizeof message, "%s", l->message);
        l->held = batches_of(l); /* the pass is over */
        pthread_mutex_unlock(&l->lock);
        return brg_error(st, "%s", message);
    }
    *images = s->images;
    *labels = s->labels;
    *n = size;
    l->held = b + 1; /* the workers may now fill up to depth batches past this one */
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->lock);
    if (waited) *waited = now() - t0;
    return BRG_OK;
}

size_t brg_loader_host_bytes(const brg_loader *l)
{
    if (!l) return 0;
    return (size_t)l->slots * (size_t)l->batch *
           ((size_t)l->src.sample_floats * sizeof(float) + (size_t)l->labels * sizeof(int32_t));
}

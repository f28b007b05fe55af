/* One pipeline across MPI ranks (brigade/distributed.h), run by
 * tests/test_mpi.sh as `mpirun -np R test_distributed`: every rank builds
 * the same plan twice, once across the ranks (each holding p/R CPU
 * devices, messages between ranks through MPI) and once with every
 * device in this process, the pipeline test_pipeline proves equal to one
 * device. For each schedule, with p = R and p = 2R devices (so channels
 * inside a rank and between ranks mix), the distributed one must give:
 * the same loss and accuracy on every rank, the same gradients (each
 * rank's stages, summed over the ranks into the whole model's), the same
 * weights after three steps, the same evaluation and predictions, and
 * every device's peak equal to its plan's to the byte. Then replicas
 * (brg_world_split_replicas): D copies of a P-device pipeline, each on
 * R/D ranks taking its share of the batch, must give the loss, the
 * gradients, the weights (BatchNorm statistics included, with deferred
 * BatchNorm) of one process running the whole batch on P devices, for
 * every D > 1 dividing R. Run without mpirun it is a world of one and
 * checks that path. */
#include <mpi.h>
#include <time.h>

#include "brigade/distributed.h"
#include "pipeline_test.h"

#define BATCH 8
static const float LR = 0.05f;

static int rank0;
static int mpi_on; /* launched by mpirun: MPI is initialized */

/* The whole model's gradients or weights (flags), each rank of comm
 * adding its stages': layers held elsewhere are zeros before the sum. */
static float *gather_over(const brg_model *m, brg_pipeline *pl, int flags, MPI_Comm comm, int64_t *n)
{
    brg_stage *stages[64];
    const int k = pipeline_stages(pl, stages);
    float *v = gather(m, stages, k, flags | GATHER_ZERO_ABSENT, NULL, n);
    if (v && mpi_on) MPI_Allreduce(MPI_IN_PLACE, v, (int)*n, MPI_FLOAT, MPI_SUM, comm);
    return v;
}

static float *gather_world(const brg_model *m, brg_pipeline *pl, int flags, int64_t *n)
{
    return gather_over(m, pl, flags, MPI_COMM_WORLD, n);
}

static brg_plan *plan_cut(const brg_model *m, int p, int batch, int mbs, brg_schedule_kind kind, int v,
                          const int *split, int sync_bn)
{
    brg_device_spec specs[16];
    for (int d = 0; d < p; d++) specs[d] = cpu_spec(64 * MiB);
    brg_plan_options o = plan_options(specs, p, batch, mbs, kind, v, split);
    o.explain = 0;
    o.sync_batchnorm = sync_bn;
    brg_plan *plan = NULL;
    CHECK_OK(brg_plan_create(m, &o, &plan));
    return plan;
}

static brg_plan *plan_for(const brg_model *m, int p, int mbs, brg_schedule_kind kind, int v)
{
    return plan_cut(m, p, BATCH, mbs, kind, v, NULL, 0);
}

/* The distributed pipeline (world) or the local one (NULL) of plan, on new
 * devices (only this rank's for the distributed one). */
static brg_pipeline *make_bn(const brg_plan *plan, const brg_world *world, brg_device **devs, int deferred_bn)
{
    const int p = brg_plan_get_info(plan)->devices;
    for (int d = 0; d < p; d++) {
        devs[d] = NULL;
        if (world && !brg_world_holds(world, d, p)) continue;
        brg_device_spec spec = brg_plan_get_stage(plan, d)->spec;
        CHECK_OK(test_device_create(&spec, d, &devs[d]));
    }
    brg_pipeline_options o = brg_pipeline_options_init();
    o.world = world;
    o.deferred_batchnorm = deferred_bn;
    brg_pipeline *pl = NULL;
    CHECK_OK(pipeline_from_plan(plan, devs, p, &o, &pl));
    return pl;
}

static brg_pipeline *make(const brg_plan *plan, const brg_world *world, brg_device **devs)
{
    return make_bn(plan, world, devs, 0);
}

static void compare_within(const char *what, const char *part, const float *a, const float *b, int64_t n,
                           double tolerance)
{
    const double d = rel_diff(a, b, n);
    CHECK_MSG(d <= tolerance, "%s: %s differ from one process's by %.3g", what, part, d);
}

/* On CPU devices the ranks compute exactly what one process does; on a
 * GPU (BRG_TEST_CPU=cuda) cuDNN's kernels may add in another order from
 * one run to the next. */
static void compare(const char *what, const char *part, const float *a, const float *b, int64_t n)
{
    compare_within(what, part, a, b, n, test_on_gpu() ? 1e-5 : 1e-6);
}

static int same_loss(double a, double b)
{
    return a == b || (test_on_gpu() && fabs(a - b) <= 1e-5 * fabs(b));
}

static void one_case(const brg_world *world, const brg_model *m, const float *images, const int32_t *labels, int p,
                     int mbs, brg_schedule_kind kind, int v)
{
    char what[128];
    snprintf(what, sizeof what, "rank %d: %s p=%d v=%d m=%d", brg_world_rank(world), brg_schedule_kind_name(kind),
             p, v, mbs);
    brg_plan *plan = plan_for(m, p, mbs, kind, v);
    if (!plan) return;
    brg_device *dd[16], *ld[16];
    brg_pipeline *dist = make(plan, world, dd), *local = make(plan, NULL, ld);
    const brg_model_tensor *out = brg_model_get_tensor(m, brg_model_output(m));
    const int64_t out_n = BATCH * out->c * out->h * out->w;
    float *pred_d = calloc((size_t)out_n, sizeof(float)), *pred_l = calloc((size_t)out_n, sizeof(float));
    if (!dist || !local || !pred_d || !pred_l) goto done;
    /* Only the first stage's rank needs the batch. */
    const int feeds = brg_world_holds(world, 0, p);
    double loss_d = 0.0, loss_l = 0.0;
    int64_t right_d = -1, right_l = -2;
    CHECK_OK(brg_pipeline_forward_backward(dist, feeds ? images : NULL, feeds ? labels : NULL, BATCH, &loss_d,
                                           &right_d));
    CHECK_OK(brg_pipeline_forward_backward(local, images, labels, BATCH, &loss_l, &right_l));
    CHECK_MSG(same_loss(loss_d, loss_l) && right_d == right_l, "%s: loss %.9g (%lld right), one process %.9g (%lld)",
              what, loss_d, (long long)right_d, loss_l, (long long)right_l);
    CHECK(brg_pipeline_counted_labels(dist) == BATCH);
    int64_t n1 = 0, n2 = 0;
    float *g1 = gather_world(m, dist, GATHER_GRADS | GATHER_TRAINABLE, &n1);
    brg_stage *stages[64];
    float *g2 = gather(m, stages, pipeline_stages(local, stages), GATHER_GRADS | GATHER_TRAINABLE, NULL, &n2);
    if (g1 && g2 && n1 == n2) compare(what, "gradients", g2, g1, n1);
    free(g1);
    free(g2);
    CHECK_OK(brg_pipeline_update(dist, LR));
    CHECK_OK(brg_pipeline_update(local, LR));
    for (int s = 0; s < 2; s++) {
        CHECK_OK(brg_pipeline_step(dist, LR, feeds ? images : NULL, feeds ? labels : NULL, BATCH, NULL, NULL));
        CHECK_OK(brg_pipeline_step(local, LR, images, labels, BATCH, NULL, NULL));
    }
    float *w1 = gather_world(m, dist, 0, &n1);
    float *w2 = gather(m, stages, pipeline_stages(local, stages), 0, NULL, &n2);
    if (w1 && w2 && n1 == n2) compare(what, "weights after 3 steps", w2, w1, n1);
    free(w1);
    free(w2);
    double el_d = 0, el_l = 0, acc_d = 0, acc_l = 0;
    CHECK_OK(brg_pipeline_evaluate(dist, feeds ? images : NULL, feeds ? labels : NULL, BATCH - 3, &el_d, &acc_d));
    CHECK_OK(brg_pipeline_evaluate(local, images, labels, BATCH - 3, &el_l, &acc_l));
    CHECK_MSG(same_loss(el_d, el_l) && acc_d == acc_l, "%s: evaluation %.9g %.4f, one process %.9g %.4f", what, el_d,
              acc_d, el_l, acc_l);
    CHECK_OK(brg_pipeline_predict(dist, feeds ? images : NULL, BATCH, pred_d));
    CHECK_OK(brg_pipeline_predict(local, images, BATCH, pred_l));
    compare(what, "predictions", pred_l, pred_d, out_n);
    /* Every device's memory on every rank, as planned. */
    for (int d = 0; d < p; d++) {
        brg_memory_report rd, rl;
        CHECK_OK(brg_pipeline_memory(dist, d, &rd));
        CHECK_OK(brg_pipeline_memory(local, d, &rl));
        CHECK_MSG(rd.peak_bytes == brg_plan_get_stage(plan, d)->peak_bytes && rd.peak_bytes == rl.peak_bytes &&
                      rd.persistent_bytes == rl.persistent_bytes && rd.receive_bytes == rl.receive_bytes,
                  "%s: device %d peak %zu, planned %zu, one process %zu", what, d, rd.peak_bytes,
                  brg_plan_get_stage(plan, d)->peak_bytes, rl.peak_bytes);
    }
    if (rank0 && p == 2 * brg_world_size(world))
        printf("%s p=%d m=%d: loss %.6f, equal to one process\n", brg_schedule_kind_name(kind), p, mbs, loss_d);
done:
    brg_pipeline_destroy(dist);
    brg_pipeline_destroy(local);
    for (int d = 0; d < p; d++) {
        brg_device_destroy(dd[d]);
        brg_device_destroy(ld[d]);
    }
    free(pred_d);
    free(pred_l);
    brg_plan_destroy(plan);
}

enum { BN_DEFERRED = 1, BN_SYNC = 2 };

/* D replicas of a P-device pipeline, micro-batches of one sample, against
 * one process running the whole batch on P devices with the same cuts.
 * With synchronized BatchNorm (bn & BN_SYNC) the one process runs
 * micro-batches of D samples, the replicas' micro-batches of one index
 * together. */
static void replica_case(const brg_world *world, const brg_model *m, const float *images, const int32_t *labels,
                         int P, int D, brg_schedule_kind kind, int v, int bn)
{
    char what[160];
    brg_world *rw = NULL;
    CHECK_OK(brg_world_split_replicas(world, D, &rw));
    if (!rw) return;
    const int deferred_bn = bn & BN_DEFERRED, sync_bn = (bn & BN_SYNC) != 0;
    snprintf(what, sizeof what, "rank %d (replica %d): %s P=%d D=%d v=%d%s%s", brg_world_rank(world),
             brg_world_replica(rw), brg_schedule_kind_name(kind), P, D, v, deferred_bn ? " deferred-bn" : "",
             sync_bn ? " sync-bn" : "");
    int split[16];
    for (int k = 0; k < P * v - 1; k++) split[k] = (k + 1) * 8 / (P * v) - 1; /* 8 blocks */
    brg_plan *rplan = plan_cut(m, P, BATCH / D, BATCH / D, kind, v, P * v > 1 ? split : NULL, sync_bn);
    brg_plan *lplan = plan_cut(m, P, BATCH, sync_bn ? BATCH / D : BATCH, kind, v, P * v > 1 ? split : NULL, 0);
    MPI_Comm comm = MPI_COMM_SELF;
    if (mpi_on) MPI_Comm_split(MPI_COMM_WORLD, brg_world_replica(rw), brg_world_rank(rw), &comm);
    brg_device *rd[16] = {0}, *ld[16] = {0};
    brg_pipeline *rep = rplan ? make_bn(rplan, rw, rd, deferred_bn) : NULL;
    brg_pipeline *local = lplan ? make_bn(lplan, NULL, ld, deferred_bn) : NULL;
    if (!rep || !local) goto done;
    const int feeds = brg_world_holds(rw, 0, P);
    double loss_r = 0.0, loss_l = 0.0;
    int64_t right_r = -1, right_l = -2;
    CHECK_OK(brg_pipeline_forward_backward(rep, feeds ? images : NULL, feeds ? labels : NULL, BATCH, &loss_r,
                                           &right_r));
    CHECK_OK(brg_pipeline_forward_backward(local, images, labels, BATCH, &loss_l, &right_l));
    CHECK_MSG(fabs(loss_r - loss_l) <= 1e-6 * fabs(loss_l) && right_r == right_l,
              "%s: loss %.9g (%lld right), one process %.9g (%lld)", what, loss_r, (long long)right_r, loss_l,
              (long long)right_l);
    CHECK_MSG(brg_pipeline_counted_labels(rep) == BATCH, "%s: %lld labels counted, the batch has %d", what,
              (long long)brg_pipeline_counted_labels(rep), BATCH);
    int64_t n1 = 0, n2 = 0;
    brg_stage *stages[64];
    float *g1 = gather_over(m, rep, GATHER_GRADS | GATHER_TRAINABLE, comm, &n1);
    float *g2 = gather(m, stages, pipeline_stages(local, stages), GATHER_GRADS | GATHER_TRAINABLE, NULL, &n2);
    CHECK(n1 == n2);
    if (g1 && g2 && n1 == n2) compare_within(what, "gradients", g2, g1, n1, 1e-5);
    free(g1);
    free(g2);
    for (int s = 0; s < 3; s++) {
        CHECK_OK(brg_pipeline_update(rep, LR));
        CHECK_OK(brg_pipeline_update(local, LR));
        if (s == 2) break;
        CHECK_OK(brg_pipeline_forward_backward(rep, feeds ? images : NULL, feeds ? labels : NULL, BATCH, NULL, NULL));
        CHECK_OK(brg_pipeline_forward_backward(local, images, labels, BATCH, NULL, NULL));
    }
    /* Every parameter, BatchNorm's running statistics included. */
    float *w1 = gather_over(m, rep, 0, comm, &n1);
    float *w2 = gather(m, stages, pipeline_stages(local, stages), 0, NULL, &n2);
    if (w1 && w2 && n1 == n2) compare_within(what, "weights after 3 steps", w2, w1, n1, 1e-5);
    free(w1);
    free(w2);
    /* Evaluation split over the replicas, each its own BATCH / D samples,
     * merged: one process's figures on all of them (the counts tell a
     * merge from every replica evaluating everything). */
    brg_metrics *me = NULL, *ml = NULL;
    CHECK_OK(brg_metrics_create(brg_model_classes(m), 0, &me));
    CHECK_OK(brg_metrics_create(brg_model_classes(m), 0, &ml));
    if (me && ml) {
        const int per = BATCH / D, r = brg_world_replica(rw);
        CHECK_OK(brg_pipeline_evaluate_metrics(rep, feeds ? images + (size_t)r * per * sample_floats(m) : NULL,
                                               feeds ? labels + r * per : NULL, per, me));
        CHECK_OK(brg_pipeline_merge_replicas(rep, me));
        CHECK_OK(brg_pipeline_evaluate_metrics(local, images, labels, BATCH, ml));
        CHECK_MSG(brg_metrics_counted(me) == BATCH && brg_metrics_accuracy(me) == brg_metrics_accuracy(ml) &&
                      fabs(brg_metrics_loss(me) - brg_metrics_loss(ml)) <= 1e-5 * fabs(brg_metrics_loss(ml)),
                  "%s: evaluation split over the replicas: %lld counted, loss %.9g, accuracy %g; one process %lld, "
                  "%.9g, %g", what, (long long)brg_metrics_counted(me), brg_metrics_loss(me),
                  brg_metrics_accuracy(me), (long long)brg_metrics_counted(ml), brg_metrics_loss(ml),
                  brg_metrics_accuracy(ml));
    }
    brg_metrics_destroy(me);
    brg_metrics_destroy(ml);
    for (int d = 0; d < P; d++) {
        brg_memory_report r;
        CHECK_OK(brg_pipeline_memory(rep, d, &r));
        CHECK_MSG(r.peak_bytes == brg_plan_get_stage(rplan, d)->peak_bytes, "%s: device %d peak %zu, planned %zu",
                  what, d, r.peak_bytes, brg_plan_get_stage(rplan, d)->peak_bytes);
    }
    if (rank0) printf("%s: loss %.6f, equal to one process\n", what, loss_r);
done:
    brg_pipeline_destroy(rep);
    brg_pipeline_destroy(local);
    for (int d = 0; d < P; d++) {
        brg_device_destroy(rd[d]);
        brg_device_destroy(ld[d]);
    }
    if (mpi_on) MPI_Comm_free(&comm);
    brg_plan_destroy(rplan);
    brg_plan_destroy(lplan);
    brg_world_finalize(rw);
}

/* Ranks that would run different pipelines stop before exchanging
 * anything, every one with the same message, which names the part of the
 * description that differs. */
static void test_disagreement(const brg_world *world, const brg_model *m)
{
    if (brg_world_size(world) < 2) return;
    const int p = brg_world_size(world);
    /* Rank 1 plans with a different micro-batch count. */
    brg_plan *plan = plan_for(m, p, brg_world_rank(world) == 1 ? 4 : 2, BRG_SCHEDULE_1F1B, 1);
    brg_device *devs[16];
    for (int d = 0; d < p; d++) devs[d] = NULL;
    const int d = brg_world_rank(world);
    CHECK_OK(test_device_create(&brg_plan_get_stage(plan, d)->spec, d, &devs[d]));
    brg_pipeline_options o = brg_pipeline_options_init();
    o.world = world;
    brg_pipeline *pl = NULL;
    CHECK_STATUS(pipeline_from_plan(plan, devs, p, &o, &pl), BRG_ERR_INVALID_ARGUMENT);
    /* named: the parts and the schedule are the same, the micro-batch not */
    CHECK_ERROR_HAS("the ranks disagree on the pipeline's settings (micro-batches");
    brg_pipeline_destroy(pl);
    brg_device_destroy(devs[d]);
    brg_plan_destroy(plan);
}

/* The devices that the ranks of this machine hold (every rank of the test
 * is on it) take distinct shares of its cores, replicas included: the
 * shares of all of them are 0 .. count - 1, each once. */
static void test_node_share(const brg_world *world)
{
    const int R = brg_world_size(world);
    CHECK(brg_world_local_size(world) == R && brg_world_local_rank(world) == brg_world_rank(world));
    for (int D = 1; D <= R; D++) {
        if (R % D) continue;
        brg_world *rw = NULL;
        CHECK_OK(brg_world_split_replicas(world, D, &rw));
        if (!rw) return;
        for (int per = 1; per <= 2; per++) {
            const int n = R / D * per; /* one replica's devices */
            int mine[2] = {-1, -1}, k = 0, count = 0, all[64];
            for (int d = 0; d < n; d++) {
                if (!brg_world_holds(rw, d, n)) continue;
                brg_world_node_share(rw, d, n, &mine[k++], &count);
                CHECK_MSG(count == R * per, "D=%d, %d per rank: %d shares for %d devices", D, per, count, R * per);
            }
            CHECK(k == per);
            if (mpi_on) MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
            else memcpy(all, mine, sizeof mine);
            unsigned long long seen = 0;
            for (int i = 0; i < 2 * R; i++)
                if (all[i] >= 0 && all[i] < 64) seen |= 1ull << all[i];
            CHECK_MSG(seen == (R * per == 64 ? ~0ull : (1ull << (R * per)) - 1), "D=%d, %d per rank: the shares "
                      "overlap or leave a gap (mask %#llx)", D, per, seen);
        }
        brg_world_finalize(rw);
    }
}

/* The heartbeat: none in a world of one; across ranks the previous
 * rank's beats come (4 a second): a second after the start (which counts
 * as a beat) the silence is short only if beats came, and it names the
 * previous rank. The goodbye, at brg_world_finalize, is test_mpi.sh's (a
 * rank done is not taken for a stopped one). */
static void test_heartbeat(brg_world *world)
{
    const int R = brg_world_size(world), me = brg_world_rank(world);
    CHECK_OK(brg_world_heartbeat_start(world));
    CHECK_OK(brg_world_heartbeat_start(world)); /* a second start changes nothing */
    int watched = -1;
    if (R == 1) {
        CHECK(brg_world_heartbeat_silence(world, &watched) == 0.0);
        return;
    }
    const struct timespec second = {1, 0};
    nanosleep(&second, NULL);
    double silence = brg_world_heartbeat_silence(world, &watched);
    for (int i = 0; i < 40 && silence > 0.5; i++) { /* up to 2 s more on a busy machine */
        const struct timespec pause = {0, 50000000};
        nanosleep(&pause, NULL);
        silence = brg_world_heartbeat_silence(world, &watched);
    }
    CHECK_MSG(silence <= 0.5, "rank %d: %.2f s since rank %d's last beat", me, silence, watched);
    CHECK(watched == (me + R - 1) % R);
}

int main(int argc, char **argv)
{
    brg_world *world = NULL;
    CHECK_OK(brg_world_init(&argc, &argv, &world));
    if (!world) return 1;
    rank0 = brg_world_rank(world) == 0;
    mpi_on = brg_world_launched();
    const int R = brg_world_size(world);
    /* Devices of another rank are not this one's: a plan of p devices
     * over 3 ranks must say so. */
    if (R > 1) {
        /* Set before CUDA could start, unless the launcher's environment had it. */
        const char *loading = getenv("CUDA_MODULE_LOADING");
        CHECK_MSG(loading && *loading, "brg_world_init of %d ranks left CUDA_MODULE_LOADING unset", R);
        CHECK_STATUS(brg_world_check_devices(world, R + 1), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("give a multiple of");
    }
    test_node_share(world);
    test_heartbeat(world);
    brg_model *m = skip_model_bn(0);
    float *images = NULL;
    int32_t *labels = NULL;
    if (m && new_data(m, BATCH, &images, &labels)) {
        /* the V-shapes put the last stage on device 0: its rank gathers the predictions */
        const brg_schedule_kind kinds[7] = {BRG_SCHEDULE_GPIPE, BRG_SCHEDULE_1F1B, BRG_SCHEDULE_INTERLEAVED,
                                            BRG_SCHEDULE_ZB_H1, BRG_SCHEDULE_ZB_H2, BRG_SCHEDULE_ZB_V,
                                            BRG_SCHEDULE_V_MIN};
        for (int per = 1; per <= 2; per++)
            for (int k = 0; k < 7; k++) {
                const int p = R * per, v = brg_schedule_kind_chunks(kinds[k], 0);
                if (p == 1 && v > 1) continue;
                if (p * v > 8) continue; /* the model has 8 blocks */
                one_case(world, m, images, labels, p, 4, kinds[k], v);
            }
        test_disagreement(world, m);
    }
    /* Replicas: every D > 1 dividing R, one and two devices per rank. */
    brg_model *mbn = skip_model_bn(1), *mfar = skip_model_bn(2);
    /* Data 1000 times further from zero than they spread, normalized
     * first thing: synchronized BatchNorm must keep the merged mean to
     * double precision (as one device does) to give the same numbers. */
    const int64_t nf = m ? BATCH * sample_floats(m) : 0;
    float *far = images ? malloc((size_t)nf * sizeof *far) : NULL;
    for (int64_t i = 0; far && i < nf; i++) far[i] = 1000.0f + images[i];
    for (int D = 2; D <= R && m && images; D++) {
        if (R % D) continue;
        for (int per = 1; per <= 2; per++) {
            const int P = R / D * per;
            if (BATCH % D || P > 8) continue;
            replica_case(world, m, images, labels, P, D, BRG_SCHEDULE_1F1B, 1, 0);
            if (P > 1) replica_case(world, m, images, labels, P, D, BRG_SCHEDULE_ZB_H1, 1, 0);
            if (P > 1 && 2 * P <= 8) replica_case(world, m, images, labels, P, D, BRG_SCHEDULE_INTERLEAVED, 2, 0);
            if (mbn) replica_case(world, mbn, images, labels, P, D, BRG_SCHEDULE_1F1B, 1, BN_DEFERRED);
            if (mbn) replica_case(world, mbn, images, labels, P, D, BRG_SCHEDULE_1F1B, 1, BN_SYNC);
            if (mbn && P > 1)
                replica_case(world, mbn, images, labels, P, D, BRG_SCHEDULE_ZB_H1, 1, BN_SYNC | BN_DEFERRED);
            if (mfar && far) replica_case(world, mfar, far, labels, P, D, BRG_SCHEDULE_1F1B, 1, BN_SYNC);
        }
    }
    free(far);
    brg_model_destroy(mfar);
    brg_model_destroy(mbn);
    free(images);
    free(labels);
    brg_model_destroy(m);
    /* Every rank's verdict: one failing rank fails the run. */
    int failures = test_failures;
    if (mpi_on) MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank0) fprintf(stderr, "%d ranks: %d checks on rank 0, %d failed over all ranks\n", R, test_checks, failures);
    brg_world_finalize(world);
    return failures ? 1 : 0;
}

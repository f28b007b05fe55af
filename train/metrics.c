/* What an evaluation adds up (brigade/metrics.h): sums, so that pieces
 * evaluated one by one give the figures of the whole. */
#include <stdlib.h>

#include "brigade/metrics.h"
#include "base/internal.h"

struct brg_metrics {
    int64_t classes;
    int32_t ignore;       /* a class (ignores nothing) or the label that counts nowhere */
    double loss_sum;      /* mean loss x counted, over add_loss */
    int64_t loss_counted; /* labels behind loss_sum */
    int64_t counted, top1, top5;
    int64_t *tp, *fp, *fn; /* [classes] each */
};

brg_status brg_metrics_create(int64_t classes, int32_t ignore_label, brg_metrics **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_metrics_create: out is NULL");
    *out = NULL;
    if (classes < 1 || classes > INT32_MAX)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "metrics of %lld classes; it takes 1..%d", (long long)classes,
                         INT32_MAX);
    brg_metrics *m = brg_calloc(1, sizeof *m, "metrics");
    int64_t *counts = brg_calloc(3 * (size_t)classes, sizeof *counts, "the per-class counts of metrics");
    if (!m || !counts) {
        free(m);
        free(counts);
        return BRG_ERR_HOST_MEMORY;
    }
    m->classes = classes;
    m->ignore = ignore_label;
    m->tp = counts;
    m->fp = counts + classes;
    m->fn = counts + 2 * classes;
    *out = m;
    return BRG_OK;
}

void brg_metrics_destroy(brg_metrics *m)
{
    if (!m) return;
    free(m->tp);
    free(m);
}

void brg_metrics_reset(brg_metrics *m)
{
    m->loss_sum = 0.0;
    m->loss_counted = m->counted = m->top1 = m->top5 = 0;
    for (int64_t k = 0; k < 3 * m->classes; k++) m->tp[k] = 0;
}

void brg_metrics_add_scores(brg_metrics *m, const float *scores, const int32_t *labels, int64_t n, int64_t pixels)
{
    const int64_t K = m->classes;
    for (int64_t i = 0; i < n; i++) {
        const float *s = scores + i * K * pixels;
        for (int64_t p = 0; p < pixels; p++) {
            const int32_t y = labels[i * pixels + p];
            if (y == m->ignore && (y < 0 || y >= K)) continue;
            /* The first maximum: move only on a strictly larger score. */
            int64_t best = 0;
            for (int64_t k = 1; k < K; k++)
                if (s[k * pixels + p] > s[best * pixels + p]) best = k;
            m->counted++;
            if (y < 0 || y >= K) {
                m->fp[best]++;
                continue;
            }
            if (best == y) {
                m->top1++;
                m->tp[y]++;
            } else {
                m->fp[best]++;
                m->fn[y]++;
            }
            if (pixels == 1) {
                /* Classes beating the label: larger, or equal and lower. */
                const float v = s[y];
                int64_t beaten_by = 0;
                for (int64_t k = 0; k < K; k++) beaten_by += s[k] > v || (s[k] == v && k < y);
                m->top5 += beaten_by < 5;
            }
        }
    }
}

void brg_metrics_add_loss(brg_metrics *m, double mean_loss, int64_t counted)
{
    m->loss_sum += mean_loss * (double)counted;
    m->loss_counted += counted;
}

int64_t brg_metrics_counted(const brg_metrics *m) { return m->counted; }

static double ratio(double a, int64_t b) { return b > 0 ? a / (double)b : 0.0; }

double brg_metrics_loss(const brg_metrics *m) { return ratio(m->loss_sum, m->loss_counted); }
double brg_metrics_accuracy(const brg_metrics *m) { return ratio((double)m->top1, m->counted); }
double brg_metrics_top5(const brg_metrics *m) { return ratio((double)m->top5, m->counted); }

double brg_metrics_class_iou(const brg_metrics *m, int64_t k)
{
    if (k < 0 || k >= m->classes) return -1.0;
    const int64_t u = m->tp[k] + m->fp[k] + m->fn[k];
    return u > 0 ? (double)m->tp[k] / (double)u : -1.0;
}

double brg_metrics_mean_iou(const brg_metrics *m)
{
    double sum = 0.0;
    int64_t present = 0;
    for (int64_t k = 0; k < m->classes; k++) {
        const double iou = brg_metrics_class_iou(m, k);
        if (iou < 0.0) continue;
        sum += iou;
        present++;
    }
    return ratio(sum, present);
}

/* ---- the flat form (train/metrics-impl.h) ---- */

enum { PACKED_HEAD = 5 };

size_t brg_metrics_packed_count(const brg_metrics *m) { return PACKED_HEAD + 3 * (size_t)m->classes; }

void brg_metrics_pack(const brg_metrics *m, double *out)
{
    out[0] = m->loss_sum;
    out[1] = (double)m->loss_counted;
    out[2] = (double)m->counted;
    out[3] = (double)m->top1;
    out[4] = (double)m->top5;
    for (int64_t k = 0; k < 3 * m->classes; k++) out[PACKED_HEAD + k] = (double)m->tp[k];
}

void brg_metrics_add_packed(brg_metrics *m, const double *in)
{
    m->loss_sum += in[0];
    m->loss_counted += (int64_t)in[1];
    m->counted += (int64_t)in[2];
    m->top1 += (int64_t)in[3];
    m->top5 += (int64_t)in[4];
    for (int64_t k = 0; k < 3 * m->classes; k++) m->tp[k] += (int64_t)in[PACKED_HEAD + k];
}

/* brigade: what an evaluation adds up.
 *
 * A metrics object sums, over every piece of a test set it is given, the
 * loss, the labels counted, the top-1 and top-5 hits and, per class, the
 * true positives, false positives and false negatives of the top-1
 * predictions. Because it keeps sums, a test set evaluated batch by batch
 * gives the same figures as evaluated whole, mean IoU included.
 *
 * A label is counted unless it equals the ignore label (the void of a
 * segmentation mask, such as 255; see brg_metrics_create); with per-pixel scores [n, K, H, W] every
 * pixel is a label. The prediction at a label is the first largest score
 * over the K classes (the device's COUNT_CORRECT rule, brigade/ops.h).
 */
#ifndef BRIGADE_METRICS_H
#define BRIGADE_METRICS_H

#include <stdint.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_metrics brg_metrics;

/* Empty metrics for scores of `classes` classes (>= 1). Labels equal to
 * ignore_label count nowhere when it is outside [0, classes); one inside,
 * such as 0, ignores nothing (the rule of brigade/ops.h's loss). */
BRG_API brg_status brg_metrics_create(int64_t classes, int32_t ignore_label, brg_metrics **out);
BRG_API void brg_metrics_destroy(brg_metrics *metrics); /* accepts NULL */
BRG_API void brg_metrics_reset(brg_metrics *metrics);

/* Add the scores of n samples, each K x pixels floats in NCHW order (K
 * classes, pixels = H*W, 1 for class scores), against their labels (n x
 * pixels). A label outside [0, K) other than the ignore label counts as a
 * miss (no class gets a true positive; the predicted class a false
 * positive). */
BRG_API void brg_metrics_add_scores(brg_metrics *metrics, const float *scores, const int32_t *labels, int64_t n,
                                    int64_t pixels);
/* Add a loss: the mean over `counted` labels. */
BRG_API void brg_metrics_add_loss(brg_metrics *metrics, double mean_loss, int64_t counted);

BRG_API int64_t brg_metrics_counted(const brg_metrics *metrics); /* labels added by add_scores, ignored ones left out */
BRG_API double brg_metrics_loss(const brg_metrics *metrics);     /* mean over the counted labels of add_loss */
BRG_API double brg_metrics_accuracy(const brg_metrics *metrics); /* top-1 hits / counted (0..1) */
/* Labels among the five largest scores, ties going to the lower class
 * (class scores only: pixels == 1), / counted. */
BRG_API double brg_metrics_top5(const brg_metrics *metrics);
/* Intersection over union of class k: TP / (TP + FP + FN); -1 when the
 * class appears neither in the counted labels nor in their predictions. */
BRG_API double brg_metrics_class_iou(const brg_metrics *metrics, int64_t k);
/* The mean of class_iou over the classes that appear (0 when none does). */
BRG_API double brg_metrics_mean_iou(const brg_metrics *metrics);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_METRICS_H */

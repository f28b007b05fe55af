/* brigade: metrics as a flat array of sums (private), to add up the
 * figures of several processes (exec/pipeline.c sums them over the ranks). */
#ifndef BRIGADE_METRICS_IMPL_H
#define BRIGADE_METRICS_IMPL_H

#include <stddef.h>

#include "brigade/metrics.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Doubles in the flat form of metrics of its classes. */
size_t brg_metrics_packed_count(const brg_metrics *metrics);
/* Its sums into out[0 .. packed_count) (counts exact below 2^53). */
void brg_metrics_pack(const brg_metrics *metrics, double *out);
/* Add a flat form (of metrics with the same classes) to metrics. */
void brg_metrics_add_packed(brg_metrics *metrics, const double *packed);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_METRICS_IMPL_H */

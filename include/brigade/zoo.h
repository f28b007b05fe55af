/* brigade: built-in models.
 *
 * Each zoo model can be built at another input size, number of classes or
 * width (a multiplier on every convolution's and hidden layer's channels),
 * so oversized variants of well-known networks are one option away. At the
 * standard settings the parameter counts equal the published ones (see
 * docs/zoo.md and tests/test_zoo.c).
 */
#ifndef BRIGADE_ZOO_H
#define BRIGADE_ZOO_H

#include <stdint.h>

#include "brigade/model.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_zoo_options {
    int64_t channels, height, width; /* input; 0 = the model's standard */
    int64_t classes;                 /* 0 = the model's standard */
    double width_mult;               /* 0 or 1 = standard widths */
} brg_zoo_options;

typedef struct brg_zoo_entry {
    const char *name;        /* "inception-v3" */
    const char *description; /* one line */
    int64_t channels, height, width, classes; /* standard settings */
} brg_zoo_entry;

/* Number of zoo models and the i-th entry (NULL when out of range). */
BRG_API int brg_zoo_count(void);
BRG_API const brg_zoo_entry *brg_zoo_entry_at(int index);
/* The entry named name, or NULL. */
BRG_API const brg_zoo_entry *brg_zoo_find(const char *name);

/* Build and finalize a zoo model. options may be NULL (standard settings).
 * An unknown name, or options the architecture cannot take (an input too
 * small for its downsampling, a width multiplier <= 0), fail with a message
 * that says what would work. */
BRG_API brg_status brg_zoo_build(const char *name, const brg_zoo_options *options, brg_model **out);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_ZOO_H */

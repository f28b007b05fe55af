/* Between io/checkpoint.c (state files) and io/checkpoint_folder.c. */
#ifndef BRG_IO_CHECKPOINT_IMPL_H
#define BRG_IO_CHECKPOINT_IMPL_H

#include "brigade/pipeline.h"
#include "brigade/status.h"

/* Load a weights file and an optimizer file into the pipeline, both
 * checked before either is copied in (never a partly loaded state). */
brg_status brg_state_load_pair(brg_pipeline *pipeline, const char *weights, const char *optimizer);

#endif

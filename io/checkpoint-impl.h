/* Between io/checkpoint.c (state files) and io/checkpoint_folder.c. */
#ifndef BRG_IO_CHECKPOINT_IMPL_H
#define BRG_IO_CHECKPOINT_IMPL_H

#include "brigade/pipeline.h"
#include "brigade/status.h"

/* Load a weights file and an optimizer file into the pipeline, both
 * checked before either is copied in (never a partly loaded state). */
brg_status brg_state_load_pair(brg_pipeline *pipeline, const char *weights, const char *optimizer);

/* 1 on the rank that writes a distributed pipeline's files: the job's rank
 * 0 (always, in one process). */
int brg_state_writer(const brg_pipeline *pipeline);

/* Collective over the pipeline's job: st where it failed here; where only
 * another rank failed, an error saying `what` failed there; BRG_OK when
 * no rank failed. Every rank calls it at the same points, so that one
 * rank's failure stops all of them together, never a rank left waiting. */
brg_status brg_state_together(const brg_pipeline *pipeline, brg_status st, const char *what);

#endif

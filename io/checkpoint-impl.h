/* Between io/checkpoint.c (state files) and io/checkpoint_folder.c. */
#ifndef BRG_IO_CHECKPOINT_IMPL_H
#define BRG_IO_CHECKPOINT_IMPL_H

#include <stdint.h>

#include "brigade/pipeline.h"
#include "brigade/status.h"

/* A file's size and zlib CRC-32, as a checkpoint's manifest lists them. */
typedef struct brg_file_sum {
    uint64_t bytes;
    uint32_t crc32;
} brg_file_sum;

/* BRG_ERR_FORMAT naming file when what was read (got) is not what its
 * manifest lists (want). */
brg_status brg_file_sum_check(const char *file, brg_file_sum got, brg_file_sum want);

/* brg_pipeline_load_state with the file checked against sum as it is read
 * (NULL: unchecked), after st (a failure before it, on this rank only:
 * every rank still takes part, and all fail). */
brg_status brg_state_load(brg_pipeline *pipeline, const char *path, unsigned parts, brg_status st,
                          const brg_file_sum *sum);

/* Load a weights file and an optimizer file into the pipeline, both
 * checked (each against sums[0] and sums[1] as read, then its tensors)
 * before either is copied in: never a partly loaded state. */
brg_status brg_state_load_pair(brg_pipeline *pipeline, const char *weights, const char *optimizer,
                               const brg_file_sum sums[2]);

/* 1 on the rank that writes a distributed pipeline's files: the job's rank
 * 0 (always, in one process). */
int brg_state_writer(const brg_pipeline *pipeline);

/* Collective over the pipeline's job: st where it failed here; where only
 * another rank failed, an error saying `what` failed there; BRG_OK when
 * no rank failed. Every rank calls it at the same points, so that one
 * rank's failure stops all of them together, never a rank left waiting. */
brg_status brg_state_together(const brg_pipeline *pipeline, brg_status st, const char *what);

#endif

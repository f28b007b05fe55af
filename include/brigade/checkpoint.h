/* A model's training state in safetensors files (brigade/safetensors.h),
 * named by layer and parameter, so that nothing in a file depends on how
 * the model was cut into stages or placed on devices.
 *
 * Names (docs/checkpoints.md):
 *   <layer>.<param>            a parameter or a BatchNorm running statistic
 *                              ("mixed5.branch1x1.conv.weight",
 *                              "conv1.bn.running_mean"), as brg_layer_param
 *                              names them
 *   <layer>.<param>.<slot>     the optimizer's state of a trainable
 *                              parameter: sgd_momentum (SGD with momentum),
 *                              adam_m and adam_v (Adam)
 * Every tensor is F32 with the parameter's shape. */
#ifndef BRIGADE_CHECKPOINT_H
#define BRIGADE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/model.h"
#include "brigade/pipeline.h"
#include "brigade/status.h"
#include "brigade/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The parts of the state a file holds. */
#define BRG_STATE_WEIGHTS 1u   /* parameters and BatchNorm running statistics */
#define BRG_STATE_OPTIMIZER 2u /* the optimizer's tensors (none for SGD without momentum) */

/* The optimizer slot's name ("adam_m") of state tensor `which` of the
 * optimizer, or NULL when it has no such tensor. */
BRG_API const char *brg_optimizer_slot_name(const brg_optimizer_config *optimizer, int which);

/* Write the parts of the pipeline's state to path (atomically, see
 * brg_safetensors_write), with n_meta key/value strings in the file's
 * metadata besides brigade's own ("brigade.model", "brigade.parts"). Call
 * between steps. */
BRG_API brg_status brg_pipeline_save_state(const brg_pipeline *pipeline, const char *path, unsigned parts,
                                           const char *const *keys, const char *const *values, int n_meta);

/* Read the parts of the state from path into the pipeline. The file must
 * hold exactly the tensors those parts name, each F32 of its parameter's
 * shape; a missing, extra, misshapen or mistyped tensor is BRG_ERR_FORMAT
 * naming the file and the tensor, and then nothing has been loaded. Call
 * between steps. */
BRG_API brg_status brg_pipeline_load_state(brg_pipeline *pipeline, const char *path, unsigned parts);

/* The size and zlib CRC-32 of the file at path, read whole: what checkpoint
 * manifests list, and what ranks under mpirun compare where one name may
 * hold other bytes on another node. BRG_ERR_IO naming the file when it
 * cannot be read. */
BRG_API brg_status brg_file_checksum(const char *path, uint64_t *bytes, uint32_t *crc);

/* Whether path is a BRG_STATE_WEIGHTS file of model, as far as its
 * header tells: the tensors brg_pipeline_load_state would want, each F32
 * of its shape, and a file of the size the header says. The data is not
 * read (a checkpoint's checksum is checked at loading): a quick refusal
 * of another model's file, or a truncated one, before planning. */
BRG_API brg_status brg_model_check_weights_file(const brg_model *model, const char *path);

/* A BRG_STATE_WEIGHTS file of model (no device needed) whose values fill
 * gives: fill(ctx, layer, param, values) writes parameter param of layer
 * (brg_layer_param's index, a BatchNorm running statistic included) into
 * values, of the parameter's count; a failure it returns stops the write.
 * n_meta key/value strings go into the file's metadata, as with
 * brg_pipeline_save_state. The file is written atomically. */
typedef brg_status (*brg_weights_fill_fn)(void *ctx, int layer, int param, float *values);
BRG_API brg_status brg_model_save_weights(const brg_model *model, brg_weights_fill_fn fill, void *ctx, const char *path,
                                          const char *const *keys, const char *const *values, int n_meta);

/* The model's initial weights for seed (brg_layer_init_param: the values a
 * pipeline or trainer created with that seed starts from) written as a
 * BRG_STATE_WEIGHTS file, without any device. */
BRG_API brg_status brg_model_save_initial_weights(const brg_model *model, uint64_t seed, const char *path);

/* ---- checkpoint folders ----
 *
 * A checkpoint is a folder DIR/step-NNNNNNNNNN (the optimizer steps done,
 * ten digits) holding weights.safetensors (BRG_STATE_WEIGHTS),
 * optimizer.safetensors (BRG_STATE_OPTIMIZER) and manifest.json:
 *
 *     {"manifest_crc32": "01234567",
 *      "format": "brigade-checkpoint", "version": 1, "steps": N,
 *      "model": {... the model file (brigade/modelfile.h) ...},
 *      "optimizer": {"kind": "adam", ...},
 *      "files": {"weights.safetensors": {"bytes": B, "crc32": "89abcdef"}, ...},
 *      "run": {... the caller's own object: data position, options ...}}
 *
 * manifest_crc32 is zlib's CRC-32 of the rest, written compact with its
 * keys sorted (jansson's JSON_COMPACT | JSON_SORT_KEYS), so that damage
 * anywhere in it is found; a manifest written before it existed has none.
 *
 * It is written as DIR/.step-NNNNNNNNNN.tmp, every file flushed to disk,
 * the manifest last, then renamed into place and DIR flushed: a crash
 * leaves either no checkpoint of that step or a whole one; its folder's
 * name and its "steps" must agree. Nothing in it
 * depends on the partition, so it resumes on other devices. */

typedef struct brg_checkpoint_manifest {
    int64_t steps;                 /* optimizer steps done */
    brg_optimizer_config optimizer;
    char *model_json;              /* the model file's text (brg_model_parse_json) */
    char *run_json;                /* the caller's "run" object as JSON text */
    uint64_t file_bytes[2];        /* what "files" lists of weights.safetensors [0] and optimizer.safetensors [1]: */
    uint32_t file_crc32[2];        /* sizes and zlib CRC-32s */
} brg_checkpoint_manifest;

/* Write a checkpoint of the pipeline (between steps) into dir (created if
 * missing), with run_json (a JSON object's text, or NULL for {}) as its
 * "run". The new folder's path goes to path (size bytes) if given. A
 * complete checkpoint of the same step already in dir is kept (the
 * caller's own, saved again at an epoch's end), its manifest replaced
 * (written beside it, renamed over it) when run_json differs.
 *
 * Then, once it is saved: of the checkpoints older than it, the newest
 * keep - 1 complete ones stay (keep >= 1) and the others go, and so do
 * crashed saves (.step-*.tmp) of any step. Newer folders are left alone.
 * Only folders (never links) holding nothing but a checkpoint's files are
 * removed; what stays for any reason is named in left (left_size bytes,
 * "" when nothing), and the save still returns BRG_OK. Two processes must
 * not save into one folder at once: see brg_checkpoint_lock. */
BRG_API brg_status brg_checkpoint_save(const brg_pipeline *pipeline, const char *dir, const char *run_json, int keep,
                                       char *path, size_t size, char *left, size_t left_size);

/* Hold dir (created if missing) for this process's saves: an exclusive
 * lock (flock) on dir/.lock, naming this process in it, until
 * brg_checkpoint_unlock(*handle) or the process ends, killed or not.
 * BRG_ERR_IO naming the holder when another process has it. On a file
 * system that cannot lock (ENOLCK, ENOSYS, EOPNOTSUPP, EINVAL) it returns
 * BRG_OK with *handle -1 and says so in note (note_size bytes; "" when
 * the folder is held), for the caller to warn. made: NULL, or strlen(dir)
 * + 1 bytes, zeroed, where made[k] becomes 1 for each folder that dir's
 * first k bytes name and the lock created, so that a caller that gives
 * the folder up removes exactly those ("a/../b/c" can make "a" besides
 * "a/../b" and "a/../b/c"), never one that was there. */
BRG_API brg_status brg_checkpoint_lock(const char *dir, int *handle, char *note, size_t note_size,
                                       unsigned char *made);
BRG_API void brg_checkpoint_unlock(int handle);

/* How many step-* folders dir holds, complete or not, and the newest's
 * step (0 and -1 when none, or when dir does not exist). */
BRG_API brg_status brg_checkpoint_count(const char *dir, int *count, int64_t *newest);

/* The newest complete checkpoint in dir: its folder's path in path (size
 * bytes). Newer folders that are not complete (no manifest, a file missing
 * or of the wrong size, a checksum mismatch: a crashed save) are passed
 * over and described in skipped (skipped_size bytes, "" when none), e.g.
 * "step-0000000300: manifest.json is missing (a save that did not finish)".
 * BRG_ERR_IO naming dir when it holds no complete checkpoint. */
BRG_API brg_status brg_checkpoint_latest(const char *dir, char *path, size_t size, char *skipped,
                                         size_t skipped_size);
/* The same, with the newest complete checkpoint's manifest, as read and
 * checked there, in *manifest (NULL: not wanted; freed by the caller with
 * brg_checkpoint_manifest_free, zeroed on failure): to read it once for a
 * resume's settings and brg_checkpoint_load_listed. */
BRG_API brg_status brg_checkpoint_latest_read(const char *dir, char *path, size_t size,
                                              brg_checkpoint_manifest *manifest, char *skipped, size_t skipped_size);

/* Whether the file at path (there or not) lies in a checkpoint's folder
 * (step-N, holding its manifest), which a file written there would break. */
BRG_API int brg_checkpoint_contains(const char *path);

/* Read and verify the checkpoint folder at path: its manifest (its own
 * checksum, and a model this brigade can build), and every file's size
 * and checksum. BRG_ERR_FORMAT naming the file on any difference. The
 * caller frees the manifest's texts with brg_checkpoint_manifest_free. */
BRG_API brg_status brg_checkpoint_read(const char *path, brg_checkpoint_manifest *out);

/* The same for the manifest alone, without reading the state files: for
 * a checkpoint's settings, or one brg_checkpoint_latest has verified. */
BRG_API brg_status brg_checkpoint_read_manifest(const char *path, brg_checkpoint_manifest *out);
BRG_API void brg_checkpoint_manifest_free(brg_checkpoint_manifest *manifest);

/* brg_pipeline_load_state of path, a state file of the checkpoint whose
 * manifest (brg_checkpoint_read_manifest of path's folder) is manifest:
 * the file is checked against the size and checksum it lists, as
 * brg_pipeline_load_state checks it, without reading the manifest again.
 * A file the manifest does not list (another name) is not checked. NULL
 * manifest: brg_pipeline_load_state. */
BRG_API brg_status brg_pipeline_load_state_listed(brg_pipeline *pipeline, const char *path, unsigned parts,
                                                  const brg_checkpoint_manifest *manifest);

/* Verify the checkpoint at path and load its weights, optimizer state and
 * step count into the pipeline, whose model must equal the checkpoint's
 * (any partition, devices, schedule or micro-batch count) and whose
 * optimizer must be of the same kind. All or nothing, as
 * brg_pipeline_load_state. */
BRG_API brg_status brg_checkpoint_load(brg_pipeline *pipeline, const char *path);
/* BRG_OK when model equals the model of the checkpoint at path (its
 * manifest), else BRG_ERR_INVALID_ARGUMENT saying how they differ: to
 * refuse another model's checkpoint before planning or loading anything. */
BRG_API brg_status brg_checkpoint_check_model(const brg_model *model, const char *path,
                                              const brg_checkpoint_manifest *manifest);
/* brg_checkpoint_load of the checkpoint at path whose manifest was read
 * already (brg_checkpoint_latest_read, brg_checkpoint_read): its state files
 * are checked against the sizes and checksums it lists as they are read,
 * and the manifest is not read again. */
BRG_API brg_status brg_checkpoint_load_listed(brg_pipeline *pipeline, const char *path,
                                              const brg_checkpoint_manifest *manifest);

#ifdef __cplusplus
}
#endif

#endif

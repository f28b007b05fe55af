/* Checkpoint folders: the state files, a manifest with the model, the
 * optimizer and a checksum of every file, written so that a crash leaves
 * a whole checkpoint or none (brigade/checkpoint.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/internal.h"
#include "brigade/checkpoint.h"
#include "brigade/modelfile.h"
#include "checkpoint-impl.h"
#include "files.h"

#define CKPT_FORMAT "brigade-checkpoint"
#define CKPT_VERSION 1
#define CKPT_PATH_MAX 4096
#define CKPT_CHECKSUM "manifest_crc32"

static const char *const state_files[2] = {"weights.safetensors", "optimizer.safetensors"};
static const unsigned state_parts[2] = {BRG_STATE_WEIGHTS, BRG_STATE_OPTIMIZER};

/* The names a checkpoint folder holds: its three files, and the
 * temporary names they are written under (safetensors.c). */
static int checkpoint_file_name(const char *name)
{
    static const char *const ours[3] = {"manifest.json", "weights.safetensors", "optimizer.safetensors"};
    for (int i = 0; i < 3; i++) {
        const size_t n = strlen(ours[i]);
        if (strncmp(name, ours[i], n) == 0 && (name[n] == '\0' || strncmp(name + n, ".tmp.", 5) == 0)) return 1;
    }
    return 0;
}

static brg_status join(char *out, const char *dir, const char *name)
{
    if ((size_t)snprintf(out, CKPT_PATH_MAX, "%s/%s", dir, name) >= CKPT_PATH_MAX)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "the path %s/%s is too long", dir, name);
    return BRG_OK;
}

/* "step-0000000123" -> 123; -1 for any other name. */
static int64_t step_of_name(const char *name)
{
    if (strncmp(name, "step-", 5) != 0 || strlen(name) != 15) return -1;
    int64_t v = 0;
    for (const char *c = name + 5; *c; c++) {
        if (*c < '0' || *c > '9') return -1;
        v = v * 10 + (*c - '0');
    }
    return v;
}

int brg_checkpoint_contains(const char *path)
{
    if (!path) return 0;
    /* The folder path names (its name's links resolved: a link into a
     * checkpoint writes there too), or "." for a bare name. */
    char folder[PATH_MAX], real[PATH_MAX], manifest[PATH_MAX + 32];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(folder, sizeof folder, ".");
    else snprintf(folder, sizeof folder, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (!realpath(folder, real)) return 0;
    const char *name = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    struct stat sb;
    snprintf(manifest, sizeof manifest, "%s/manifest.json", real);
    return step_of_name(name) >= 0 && stat(manifest, &sb) == 0;
}

/* ---- the manifest ---- */

static json_t *optimizer_json(const brg_optimizer_config *o)
{
    return json_pack("{s:s, s:f, s:f, s:f, s:f, s:f}", "kind", brg_optimizer_name(o->kind), "momentum",
                     (double)o->momentum, "weight_decay", (double)o->weight_decay, "beta1", (double)o->beta1, "beta2",
                     (double)o->beta2, "epsilon", (double)o->epsilon);
}

/* The manifest's own checksum: zlib's CRC-32 of its canonical text (compact,
 * keys sorted) without the checksum's member, so that it depends on the
 * values alone, not on the layout they were written in. A JSON real is
 * written with 17 digits, so the text read back is the text written. */
static brg_status manifest_crc32(json_t *root, char hex[16])
{
    json_t *content = json_copy(root); /* shallow: the members are shared */
    char *text = NULL;
    if (content) {
        json_object_del(content, CKPT_CHECKSUM);
        text = json_dumps(content, JSON_COMPACT | JSON_SORT_KEYS);
    }
    json_decref(content);
    if (!text) return brg_error(BRG_ERR_HOST_MEMORY, "no host memory for the checksum of a checkpoint's manifest");
    snprintf(hex, 16, "%08lx", (unsigned long)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)text, (uInt)strlen(text)));
    free(text);
    return BRG_OK;
}

/* The manifest's JSON text for the files already in tmp. */
static brg_status manifest_text(const brg_pipeline *pl, const char *tmp, const char *run_json, char **out)
{
    *out = NULL;
    const brg_pipeline_desc *desc = brg_pipeline_get_desc(pl);
    char *model_text = NULL;
    BRG_CHECK(brg_model_to_json(desc->model, &model_text));
    json_error_t jerr;
    json_t *model = json_loads(model_text, 0, &jerr);
    free(model_text);
    json_t *run = json_loads(run_json ? run_json : "{}", 0, &jerr);
    json_t *files = json_object();
    json_t *content = json_object();
    json_t *root = json_object();
    brg_status st = BRG_OK;
    if (!run || !json_is_object(run))
        st = brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_checkpoint_save: run_json is not a JSON object: %s",
                       run ? "another JSON value" : jerr.text);
    else if (!model || !files || !content || !root)
        st = brg_error(BRG_ERR_HOST_MEMORY, "no host memory for a checkpoint's manifest");
    for (int i = 0; i < 2 && st == BRG_OK; i++) {
        char path[CKPT_PATH_MAX];
        uint64_t bytes = 0;
        uint32_t crc = 0;
        st = join(path, tmp, state_files[i]);
        if (st == BRG_OK) st = brg_file_checksum(path, &bytes, &crc);
        if (st == BRG_OK) {
            char hex[16];
            snprintf(hex, sizeof hex, "%08" PRIx32, crc);
            json_object_set_new(files, state_files[i],
                                json_pack("{s:I, s:s}", "bytes", (json_int_t)bytes, "crc32", hex));
        }
    }
    char hex[16];
    if (st == BRG_OK) {
        json_object_set_new(content, "format", json_string(CKPT_FORMAT));
        json_object_set_new(content, "version", json_integer(CKPT_VERSION));
        json_object_set_new(content, "steps", json_integer((json_int_t)brg_pipeline_steps(pl)));
        json_object_set(content, "model", model);
        json_object_set_new(content, "optimizer", optimizer_json(&desc->optimizer));
        json_object_set(content, "files", files);
        json_object_set(content, "run", run);
        st = manifest_crc32(content, hex);
    }
    if (st == BRG_OK) {
        /* The checksum first, on a line of its own: a test that edits a
         * manifest on purpose removes that line (a manifest written before
         * checksums were). */
        json_object_set_new(root, CKPT_CHECKSUM, json_string(hex));
        json_object_update(root, content);
        *out = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        if (!*out) st = brg_error(BRG_ERR_HOST_MEMORY, "no host memory for a checkpoint's manifest");
    }
    json_decref(model);
    json_decref(run);
    json_decref(files);
    json_decref(content);
    json_decref(root);
    return st;
}

static brg_status manifest_error(const char *path, const char *what)
{
    return brg_error(BRG_ERR_FORMAT, "%s/manifest.json: %s", path, what);
}

static brg_status parse_optimizer(const char *path, json_t *o, brg_optimizer_config *out)
{
    const char *kind = NULL;
    double momentum = 0, wd = 0, b1 = 0, b2 = 0, eps = 0;
    json_error_t jerr;
    if (!o || json_unpack_ex(o, &jerr, JSON_STRICT, "{s:s, s:F, s:F, s:F, s:F, s:F}", "kind", &kind, "momentum",
                             &momentum, "weight_decay", &wd, "beta1", &b1, "beta2", &b2, "epsilon", &eps) != 0)
        return manifest_error(path, "\"optimizer\" is not {kind, momentum, weight_decay, beta1, beta2, epsilon}");
    brg_optimizer_kind k;
    if (brg_optimizer_parse(kind, &k) != BRG_OK) return manifest_error(path, "unknown optimizer kind");
    *out = brg_optimizer_config_init(k);
    out->momentum = (float)momentum;
    out->weight_decay = (float)wd;
    out->beta1 = (float)b1;
    out->beta2 = (float)b2;
    out->epsilon = (float)eps;
    return BRG_OK;
}

/* The size and checksum the manifest lists for each state file. */
static brg_status listed_sums(const char *path, json_t *files, brg_file_sum sums[2])
{
    if (!json_is_object(files)) return manifest_error(path, "\"files\" is not an object");
    for (int i = 0; i < 2; i++) {
        json_t *f = json_object_get(files, state_files[i]);
        json_int_t bytes = 0;
        const char *crc = NULL;
        char end = 0, what[160];
        unsigned long value = 0;
        if (!f || json_unpack(f, "{s:I, s:s}", "bytes", &bytes, "crc32", &crc) != 0 || bytes < 0 ||
            strlen(crc) != 8 || sscanf(crc, "%8lx%c", &value, &end) != 1) {
            snprintf(what, sizeof what, "\"files\" has no {bytes, crc32} for %s", state_files[i]);
            return manifest_error(path, what);
        }
        sums[i].bytes = (uint64_t)bytes;
        sums[i].crc32 = (uint32_t)value;
    }
    return BRG_OK;
}

/* Every state file has the size and checksum the manifest lists. */
static brg_status verify_files(const char *path, const brg_file_sum sums[2])
{
    for (int i = 0; i < 2; i++) {
        char file[CKPT_PATH_MAX];
        BRG_CHECK(join(file, path, state_files[i]));
        struct stat sb;
        if (stat(file, &sb) != 0 && errno == ENOENT)
            return brg_error(BRG_ERR_FORMAT, "%s is missing (its checkpoint's manifest lists it)", file);
        brg_file_sum got;
        BRG_CHECK(brg_file_checksum(file, &got.bytes, &got.crc32));
        BRG_CHECK(brg_file_sum_check(file, got, sums[i]));
    }
    return BRG_OK;
}

/* The step a checkpoint folder's path names ("DIR/step-0000000123" or
 * with a trailing '/'), or -1 for a folder of another name. */
static int64_t named_step(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    char name[32];
    if (n - b >= sizeof name) return -1;
    memcpy(name, path + b, n - b);
    name[n - b] = '\0';
    return step_of_name(name);
}

void brg_checkpoint_manifest_free(brg_checkpoint_manifest *m)
{
    if (!m) return;
    free(m->model_json);
    free(m->run_json);
    m->model_json = m->run_json = NULL;
}

/* The members a manifest may have; any other is damage (or a newer
 * brigade's), and a bit flipped in the checksum's name is caught so. */
static const char *unknown_member(json_t *root)
{
    static const char *const known[] = {CKPT_CHECKSUM, "format", "version", "steps", "model", "optimizer", "files",
                                        "run"};
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        int found = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0] && !found; i++) found = strcmp(key, known[i]) == 0;
        if (!found) return key;
    }
    return NULL;
}

/* The manifest's checksum matches its content. One written before
 * checksums were has none, and is taken as it is. */
static brg_status check_manifest_crc32(const char *path, json_t *root)
{
    json_t *recorded = json_object_get(root, CKPT_CHECKSUM);
    if (!recorded) return BRG_OK;
    char hex[16], what[200];
    BRG_CHECK(manifest_crc32(root, hex));
    if (json_is_string(recorded) && strcmp(json_string_value(recorded), hex) == 0) return BRG_OK;
    snprintf(what, sizeof what, "its content's checksum is %s, but it records %s (a damaged or edited manifest)", hex,
             json_is_string(recorded) ? json_string_value(recorded) : "no string");
    return manifest_error(path, what);
}

/* The model a manifest names must be one this brigade can build. */
static brg_status check_model(const char *path, json_t *model)
{
    char *text = json_dumps(model, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text) return brg_error(BRG_ERR_HOST_MEMORY, "no host memory to read %s/manifest.json", path);
    char source[CKPT_PATH_MAX + 32];
    snprintf(source, sizeof source, "%s/manifest.json", path);
    brg_model *m = NULL;
    const brg_status st = brg_model_parse_json(text, strlen(text), source, &m);
    free(text);
    brg_model_destroy(m);
    if (st == BRG_OK || st == BRG_ERR_HOST_MEMORY) return st;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", brg_last_error());
    return brg_error(BRG_ERR_FORMAT, "%s: its \"model\" is not a model: %s", source, msg);
}

/* Read and check the manifest of the checkpoint at path into out, and the
 * sizes and checksums it lists into sums; the state files are not read. */
static brg_status read_manifest(const char *path, brg_checkpoint_manifest *out, brg_file_sum sums[2])
{
    memset(out, 0, sizeof *out);
    char file[CKPT_PATH_MAX];
    BRG_CHECK(join(file, path, "manifest.json"));
    struct stat sb;
    if (stat(file, &sb) != 0 && errno == ENOENT)
        return brg_error(BRG_ERR_FORMAT, "%s is missing (a save that did not finish, or not a checkpoint)", file);
    /* Read apart from parsing: a read that fails (I/O, memory) says
     * nothing about the checkpoint, a text that does not parse does. */
    char *text = NULL;
    size_t length = 0;
    BRG_CHECK(brg_read_file(file, "checkpoint manifest", 64u << 20, &text, &length));
    json_error_t jerr;
    json_t *root = json_loadb(text ? text : "", length, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root && json_error_code(&jerr) == json_error_out_of_memory)
        return brg_error(BRG_ERR_HOST_MEMORY, "no host memory to read %s", file);
    if (!root) return brg_error(BRG_ERR_FORMAT, "%s: line %d: %s", file, jerr.line, jerr.text);
    brg_status st = BRG_OK;
    const char *format = json_string_value(json_object_get(root, "format"));
    json_t *steps = json_object_get(root, "steps"), *model = json_object_get(root, "model");
    json_t *run = json_object_get(root, "run");
    char what[200];
    if (!json_is_object(root)) st = manifest_error(path, "it is not a JSON object");
    else if (!format || strcmp(format, CKPT_FORMAT) != 0)
        st = manifest_error(path, "\"format\" is not \"" CKPT_FORMAT "\"");
    else if (json_integer_value(json_object_get(root, "version")) != CKPT_VERSION)
        st = manifest_error(path, "\"version\" is not 1 (a checkpoint of another brigade version)");
    else if (unknown_member(root)) {
        snprintf(what, sizeof what, "it has a member \"%.64s\" that no checkpoint has (a damaged manifest, or one "
                 "of another brigade version)", unknown_member(root));
        st = manifest_error(path, what);
    } else st = check_manifest_crc32(path, root);
    if (st != BRG_OK) {
    } else if (!json_is_integer(steps) || json_integer_value(steps) < 0)
        st = manifest_error(path, "\"steps\" is not an integer >= 0");
    else if (named_step(path) >= 0 && named_step(path) != (int64_t)json_integer_value(steps))
        st = manifest_error(path, "\"steps\" is not the step its folder is named after (a renamed or edited "
                                  "checkpoint)");
    else if (!json_is_object(model) || !json_is_object(run))
        st = manifest_error(path, "\"model\" or \"run\" is not an object");
    if (st == BRG_OK) st = parse_optimizer(path, json_object_get(root, "optimizer"), &out->optimizer);
    if (st == BRG_OK) st = listed_sums(path, json_object_get(root, "files"), sums);
    if (st == BRG_OK) st = check_model(path, model);
    if (st == BRG_OK) {
        out->steps = (int64_t)json_integer_value(steps);
        for (int i = 0; i < 2; i++) {
            out->file_bytes[i] = sums[i].bytes;
            out->file_crc32[i] = sums[i].crc32;
        }
        out->model_json = json_dumps(model, JSON_COMPACT | JSON_PRESERVE_ORDER);
        out->run_json = json_dumps(run, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!out->model_json || !out->run_json) st = brg_error(BRG_ERR_HOST_MEMORY, "no host memory for %s", file);
    }
    json_decref(root);
    if (st != BRG_OK) brg_checkpoint_manifest_free(out);
    return st;
}

brg_status brg_checkpoint_read_manifest(const char *path, brg_checkpoint_manifest *out)
{
    if (!path || !out)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_checkpoint_read_manifest: path and out must be given");
    brg_file_sum sums[2];
    return read_manifest(path, out, sums);
}

/* Which of state_files file names (its last name), or -1. */
static int state_file_index(const char *file)
{
    const char *slash = strrchr(file, '/');
    const char *name = slash ? slash + 1 : file;
    for (int i = 0; i < 2; i++)
        if (strcmp(name, state_files[i]) == 0) return i;
    return -1;
}

/* When file is a state file of a checkpoint (DIR/step-N/weights.safetensors),
 * *listed 1 and the size and checksum its manifest lists in sum; else
 * *listed 0. A damaged manifest is BRG_ERR_FORMAT. */
static brg_status sum_in_manifest(const char *file, int *listed, brg_file_sum *sum)
{
    *listed = 0;
    const char *slash = strrchr(file, '/');
    const int which = state_file_index(file);
    if (which < 0 || !brg_checkpoint_contains(file)) return BRG_OK;
    char folder[CKPT_PATH_MAX];
    if (!slash) snprintf(folder, sizeof folder, ".");
    else if ((size_t)snprintf(folder, sizeof folder, "%.*s", slash == file ? 1 : (int)(slash - file), file) >=
             sizeof folder)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "the path %s is too long", file);
    brg_checkpoint_manifest m;
    brg_file_sum sums[2];
    BRG_CHECK(read_manifest(folder, &m, sums));
    brg_checkpoint_manifest_free(&m);
    *listed = 1;
    *sum = sums[which];
    return BRG_OK;
}

brg_status brg_pipeline_load_state(brg_pipeline *pl, const char *path, unsigned parts)
{
    /* A state file of a checkpoint (eval's --weights DIR/step-N/...) is
     * checked against the checksum its manifest lists. */
    brg_file_sum sum;
    int listed = 0;
    const brg_status st = path ? sum_in_manifest(path, &listed, &sum) : BRG_OK;
    return brg_state_load(pl, path, parts, st, listed ? &sum : NULL);
}

brg_status brg_pipeline_load_state_listed(brg_pipeline *pl, const char *path, unsigned parts,
                                          const brg_checkpoint_manifest *manifest)
{
    if (!manifest) return brg_pipeline_load_state(pl, path, parts);
    const int which = path ? state_file_index(path) : -1;
    brg_file_sum sum = {0, 0};
    if (which >= 0) sum = (brg_file_sum){manifest->file_bytes[which], manifest->file_crc32[which]};
    return brg_state_load(pl, path, parts, BRG_OK, which >= 0 ? &sum : NULL);
}

brg_status brg_checkpoint_read(const char *path, brg_checkpoint_manifest *out)
{
    if (!path || !out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_checkpoint_read: path and out must be given");
    brg_file_sum sums[2];
    BRG_CHECK(read_manifest(path, out, sums));
    const brg_status st = verify_files(path, sums);
    if (st != BRG_OK) brg_checkpoint_manifest_free(out);
    return st;
}

/* ---- saving ---- */

/* BRG_DEBUG_SAVE_DELAY_MS=N: sleep N ms after each state file of a save, so
 * that a test can kill the process in the middle of one. */
static void debug_save_delay(void)
{
    const char *v = getenv("BRG_DEBUG_SAVE_DELAY_MS");
    const long ms = v ? strtol(v, NULL, 10) : 0;
    if (ms <= 0) return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The step-* folders in dir, newest first (*n of them; free *steps). */
static brg_status list_steps(const char *dir, int64_t **steps, int *n)
{
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return brg_error(BRG_ERR_IO, "cannot open the checkpoint folder %s: %s", dir, strerror(errno));
    int room = 0;
    const struct dirent *e;
    brg_status st = BRG_OK;
    while ((e = readdir(d)) != NULL) {
        const int64_t s = step_of_name(e->d_name);
        if (s < 0) continue;
        if (*n == room) {
            room = room ? 2 * room : 16;
            int64_t *more = realloc(*steps, (size_t)room * sizeof **steps);
            if (!more) {
                st = brg_error(BRG_ERR_HOST_MEMORY, "no host memory to list %s", dir);
                break;
            }
            *steps = more;
        }
        (*steps)[(*n)++] = s;
    }
    closedir(d);
    /* newest first: insertion sort, a folder holds few */
    for (int i = 1; i < *n; i++)
        for (int j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
            const int64_t t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
        }
    if (st != BRG_OK) {
        free(*steps);
        *steps = NULL;
        *n = 0;
    }
    return st;
}

static void step_name(char *out, size_t size, int64_t step, int tmp)
{
    snprintf(out, size, "%sstep-%010lld%s", tmp ? "." : "", (long long)step, tmp ? ".tmp" : "");
}

/* Append "what: why" to the note of what a prune left (left_size bytes). */
static void note_left(char *left, size_t left_size, const char *what)
{
    if (!left || !left_size) return;
    const size_t at = strlen(left);
    if (at + 1 < left_size)
        snprintf(left + at, left_size - at, "%s%s: %s", at ? "; " : "", what, brg_last_error());
}

/* After the save of step newest: keep the newest keep - 1 complete
 * checkpoints older than it and remove the other older ones, then the
 * crashed saves (.step-*.tmp) of any step. Folders newer than newest
 * (passed over by a resume as not complete; a save of their step replaces
 * them) are left alone, and so are those that cannot be read now for
 * another reason than damage (I/O, memory). A folder that cannot be
 * removed stays, named in left: the new checkpoint is saved whatever
 * happens here. */
static void prune(const char *dir, int keep, int64_t newest, char *left, size_t left_size)
{
    int64_t *steps = NULL;
    int n = 0;
    if (list_steps(dir, &steps, &n) != BRG_OK) {
        note_left(left, left_size, dir);
        return;
    }
    int kept = 1; /* newest */
    for (int i = 0; i < n; i++) {
        if (steps[i] >= newest) continue;
        char name[32], path[CKPT_PATH_MAX];
        step_name(name, sizeof name, steps[i], 0);
        if (join(path, dir, name) != BRG_OK) continue;
        brg_checkpoint_manifest m;
        const brg_status whole = kept < keep ? brg_checkpoint_read(path, &m) : BRG_ERR_FORMAT;
        if (whole == BRG_OK) {
            brg_checkpoint_manifest_free(&m);
            kept++;
            continue;
        }
        if (whole != BRG_ERR_FORMAT) { /* unreadable now (I/O, memory), not known damaged: it stays */
            note_left(left, left_size, name);
            continue;
        }
        if (brg_io_remove_folder_of(path, checkpoint_file_name) != BRG_OK) note_left(left, left_size, name);
    }
    free(steps);
    DIR *d = opendir(dir);
    const struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        const size_t len = strlen(e->d_name);
        char path[CKPT_PATH_MAX];
        if (len != 20 || e->d_name[0] != '.' || strcmp(e->d_name + 16, ".tmp") != 0) continue;
        char name[16];
        memcpy(name, e->d_name + 1, 15);
        name[15] = '\0';
        if (step_of_name(name) < 0 || join(path, dir, e->d_name) != BRG_OK) continue;
        if (brg_io_remove_folder_of(path, checkpoint_file_name) != BRG_OK) note_left(left, left_size, e->d_name);
    }
    if (d) closedir(d);
    if (brg_io_sync_folder(dir) != BRG_OK) note_left(left, left_size, dir);
}

/* 1 when the run objects a and b (JSON texts) are equal. */
static int same_run(const char *a, const char *b)
{
    json_t *ja = json_loads(a ? a : "{}", 0, NULL), *jb = json_loads(b ? b : "{}", 0, NULL);
    const int same = ja && jb && json_equal(ja, jb);
    json_decref(ja);
    json_decref(jb);
    return same;
}

/* A new manifest for the whole checkpoint folder final, replacing the
 * old one at once. */
static brg_status replace_manifest(const brg_pipeline *pl, const char *final, const char *run_json)
{
    char file[CKPT_PATH_MAX];
    BRG_CHECK(join(file, final, "manifest.json"));
    char *manifest = NULL;
    brg_status st = manifest_text(pl, final, run_json, &manifest);
    if (st == BRG_OK) st = brg_io_replace_synced(file, manifest, strlen(manifest));
    free(manifest);
    return st;
}

/* The writer's first part of a save: the folder ready for the files in
 * tmp, or *done when final holds this step already (kept if whole). */
static brg_status start_save(const brg_pipeline *pl, const char *dir, const char *final, const char *tmp,
                             const char *run_json, int *done)
{
    *done = 0;
    BRG_CHECK(brg_io_make_folders(dir, NULL));
    struct stat sb;
    if (stat(final, &sb) == 0) {
        /* This step is saved already (the end of an epoch on a checkpoint
         * step, or a stop after the epoch's last step): keep it if whole,
         * else write it again. The state is the same; the run may be at a
         * later point of it (its epoch evaluated and ended), which only
         * the manifest says. */
        brg_checkpoint_manifest m;
        if (brg_checkpoint_read(final, &m) == BRG_OK) {
            const int same = same_run(m.run_json, run_json);
            brg_checkpoint_manifest_free(&m);
            if (!same) BRG_CHECK(replace_manifest(pl, final, run_json));
            *done = 1;
            return BRG_OK;
        }
        BRG_CHECK(brg_io_remove_folder_of(final, checkpoint_file_name));
    }
    if (lstat(tmp, &sb) == 0) BRG_CHECK(brg_io_remove_folder_of(tmp, checkpoint_file_name)); /* a crashed save */
    if (mkdir(tmp, 0777) != 0) return brg_error(BRG_ERR_IO, "cannot create the folder %s: %s", tmp, strerror(errno));
    return BRG_OK;
}

/* The writer's last part: the manifest, then tmp renamed to final. */
static brg_status finish_save(const brg_pipeline *pl, const char *tmp, const char *final, const char *run_json)
{
    char file[CKPT_PATH_MAX];
    char *manifest = NULL;
    brg_status st = manifest_text(pl, tmp, run_json, &manifest);
    if (st == BRG_OK) st = join(file, tmp, "manifest.json");
    if (st == BRG_OK) st = brg_io_write_synced(file, manifest, strlen(manifest));
    free(manifest);
    if (st == BRG_OK) st = brg_io_sync_folder(tmp);
    if (st == BRG_OK && rename(tmp, final) != 0)
        st = brg_error(BRG_ERR_IO, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
    return st;
}

brg_status brg_checkpoint_save(const brg_pipeline *pl, const char *dir, const char *run_json, int keep, char *path,
                               size_t size, char *left, size_t left_size)
{
    if (left && left_size) left[0] = '\0';
    if (!pl || !dir || keep < 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_checkpoint_save: give a pipeline, a folder and keep >= 1");
    char name[32], tmp_name[40], final[CKPT_PATH_MAX], tmp[CKPT_PATH_MAX], file[CKPT_PATH_MAX];
    step_name(name, sizeof name, brg_pipeline_steps(pl), 0);
    step_name(tmp_name, sizeof tmp_name, brg_pipeline_steps(pl), 1);
    BRG_CHECK(join(final, dir, name));
    BRG_CHECK(join(tmp, dir, tmp_name));
    if (path && size) snprintf(path, size, "%s", final);
    /* Across ranks, one writes the folder and every rank sends it the
     * state of its devices (brg_pipeline_save_state); each part ends with
     * every rank knowing whether any failed. */
    const int writer = brg_state_writer(pl);
    int done = 0;
    brg_status st = writer ? start_save(pl, dir, final, tmp, run_json, &done) : BRG_OK;
    BRG_CHECK(brg_state_together(pl, st, "preparing the checkpoint folder"));
    if (brg_world_any(brg_pipeline_world(pl), done)) {
        if (writer) prune(dir, keep, brg_pipeline_steps(pl), left, left_size);
        return BRG_OK;
    }
    for (int i = 0; i < 2 && st == BRG_OK; i++) {
        st = join(file, tmp, state_files[i]);
        if (st == BRG_OK) st = brg_pipeline_save_state(pl, file, state_parts[i], NULL, NULL, 0);
        debug_save_delay();
    }
    if (st == BRG_OK && writer) st = finish_save(pl, tmp, final, run_json);
    if (writer && st != BRG_OK) {
        const brg_status cause = st;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", brg_last_error());
        (void)brg_io_remove_folder_of(tmp, checkpoint_file_name);
        st = brg_error(cause, "%s", msg);
    }
    if (writer && st == BRG_OK) st = brg_io_sync_folder(dir);
    BRG_CHECK(brg_state_together(pl, st, "writing the checkpoint"));
    if (writer) prune(dir, keep, brg_pipeline_steps(pl), left, left_size);
    return BRG_OK;
}

brg_status brg_checkpoint_lock(const char *dir, int *handle, char *note, size_t note_size, unsigned char *made)
{
    if (note && note_size) note[0] = '\0';
    if (!dir || !handle)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_checkpoint_lock: folder and handle must be given");
    *handle = -1;
    char file[CKPT_PATH_MAX];
    BRG_CHECK(join(file, dir, ".lock"));
    /* A run that gives up a folder it made removes its lock file while it
     * holds it, then the folder: a lock taken on that file meanwhile is on
     * a name that is gone, so it is taken again on the one there now. */
    int fd = -1, err = 0;
    for (int tries = 0; fd < 0; tries++) {
        BRG_CHECK(brg_io_make_folders(dir, made));
        fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) return brg_error(BRG_ERR_IO, "cannot open %s: %s", file, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            err = errno; /* held, or no locks here: said below */
            break;
        }
        struct stat held, named;
        if (fstat(fd, &held) == 0 && stat(file, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino)
            break;
        close(fd);
        fd = -1;
        if (tries == 100) return brg_error(BRG_ERR_IO, "cannot hold %s: it is removed each time it is locked", file);
    }
    if (err) {
        char holder[128] = "";
        const ssize_t got = pread(fd, holder, sizeof holder - 1, 0);
        holder[got > 0 ? got : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        close(fd);
        if (err == EWOULDBLOCK || err == EAGAIN || err == EACCES)
            return brg_error(BRG_ERR_IO, "another run (%s) is saving checkpoints in %s; two runs must not share a "
                             "checkpoint folder: wait for it to end, or give this one another folder",
                             holder[0] ? holder : "its process is not named", dir);
        if (err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP || err == EINVAL) {
            /* A file system without locks (NFS mounted nolock, Lustre
             * without flock): the saves work, only the guard is missing. */
            if (note && note_size)
                snprintf(note, note_size,
                         "the file system of %s cannot lock %s (%s): this run goes on without the lock, so make "
                         "sure that no other run saves checkpoints in that folder",
                         dir, file, strerror(err));
            return BRG_OK;
        }
        return brg_error(BRG_ERR_IO, "cannot lock %s: %s", file, strerror(err));
    }
    /* Who holds it, for the message above; the lock itself is flock's. */
    char me[128], host[64] = "";
    if (gethostname(host, sizeof host) != 0) host[0] = '\0';
    host[sizeof host - 1] = '\0';
    const int n = snprintf(me, sizeof me, "process %ld on %s\n", (long)getpid(), host[0] ? host : "this host");
    if (ftruncate(fd, 0) != 0 || pwrite(fd, me, (size_t)n, 0) != n) {
        /* The name is for messages only: a lock without it still holds. */
    }
    *handle = fd;
    return BRG_OK;
}

void brg_checkpoint_unlock(int handle)
{
    if (handle >= 0) close(handle);
}

brg_status brg_checkpoint_count(const char *dir, int *count, int64_t *newest)
{
    if (!dir || !count || !newest)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_checkpoint_count: folder, count and newest must be given");
    *count = 0;
    *newest = -1;
    struct stat sb;
    if (stat(dir, &sb) != 0 && errno == ENOENT) return BRG_OK;
    int64_t *steps = NULL;
    BRG_CHECK(list_steps(dir, &steps, count));
    if (*count) *newest = steps[0];
    free(steps);
    return BRG_OK;
}

/* ---- finding and loading ---- */

brg_status brg_checkpoint_latest_read(const char *dir, char *path, size_t size, brg_checkpoint_manifest *manifest,
                                      char *skipped, size_t skipped_size)
{
    if (manifest) memset(manifest, 0, sizeof *manifest);
    if (!dir || !path || size == 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_checkpoint_latest: folder and path must be given");
    path[0] = '\0';
    size_t at = 0;
    if (skipped && skipped_size) skipped[0] = '\0';
    int64_t *steps = NULL;
    int n = 0;
    BRG_CHECK(list_steps(dir, &steps, &n));
    brg_status st = BRG_ERR_IO;
    for (int i = 0; i < n; i++) {
        char name[32], folder[CKPT_PATH_MAX];
        step_name(name, sizeof name, steps[i], 0);
        if (join(folder, dir, name) != BRG_OK) continue;
        brg_checkpoint_manifest m;
        if (brg_checkpoint_read(folder, &m) == BRG_OK) {
            if (manifest) *manifest = m; /* the caller's now: the one reading of it */
            else brg_checkpoint_manifest_free(&m);
            snprintf(path, size, "%s", folder);
            st = BRG_OK;
            break;
        }
        if (skipped && at < skipped_size)
            at += (size_t)snprintf(skipped + at, skipped_size - at, "%s%s: %s", at ? "; " : "", name, brg_last_error());
    }
    free(steps);
    if (st != BRG_OK)
        return brg_error(BRG_ERR_IO, "%s holds no complete checkpoint%s%s", dir, n ? ": " : " (no step-* folders)",
                         n && skipped ? skipped : "");
    return BRG_OK;
}

brg_status brg_checkpoint_latest(const char *dir, char *path, size_t size, char *skipped, size_t skipped_size)
{
    return brg_checkpoint_latest_read(dir, path, size, NULL, skipped, skipped_size);
}

brg_status brg_checkpoint_check_model(const brg_model *model, const char *path, const brg_checkpoint_manifest *m)
{
    if (!model || !path || !m || !m->model_json)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_checkpoint_check_model: model, path and manifest must be given");
    brg_model *theirs = NULL;
    char source[CKPT_PATH_MAX + 32], why[256] = "";
    snprintf(source, sizeof source, "%s/manifest.json", path);
    brg_status st = brg_model_parse_json(m->model_json, strlen(m->model_json), source, &theirs);
    if (st == BRG_OK && !brg_model_equal(theirs, model, why, sizeof why))
        st = brg_error(BRG_ERR_INVALID_ARGUMENT, "the checkpoint %s is of another model than this run's (checkpoint's "
                       "'%s' against this '%s': %s)", path, brg_model_name(theirs), brg_model_name(model), why);
    brg_model_destroy(theirs);
    return st;
}

brg_status brg_checkpoint_load_listed(brg_pipeline *pl, const char *path, const brg_checkpoint_manifest *m)
{
    if (!pl || !path || !m || !m->model_json)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_checkpoint_load: pipeline, path and manifest must be given");
    const brg_pipeline_desc *desc = brg_pipeline_get_desc(pl);
    brg_status st = brg_checkpoint_check_model(desc->model, path, m);
    if (st == BRG_OK && m->optimizer.kind != desc->optimizer.kind)
        st = brg_error(BRG_ERR_INVALID_ARGUMENT, "the checkpoint %s holds %s state; this run's optimizer is %s", path,
                       brg_optimizer_name(m->optimizer.kind), brg_optimizer_name(desc->optimizer.kind));
    char weights[CKPT_PATH_MAX], optimizer[CKPT_PATH_MAX];
    if (st == BRG_OK) st = join(weights, path, state_files[0]);
    if (st == BRG_OK) st = join(optimizer, path, state_files[1]);
    st = brg_state_together(pl, st, "checking the checkpoint");
    /* The state files are checked against the manifest's sums as they are
     * read in (one read of each, and no window for a change in between). */
    const brg_file_sum sums[2] = {{m->file_bytes[0], m->file_crc32[0]}, {m->file_bytes[1], m->file_crc32[1]}};
    if (st == BRG_OK) st = brg_state_load_pair(pl, weights, optimizer, sums);
    if (st == BRG_OK) st = brg_pipeline_set_steps(pl, m->steps);
    return st;
}

brg_status brg_checkpoint_load(brg_pipeline *pl, const char *path)
{
    if (!pl || !path)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_checkpoint_load: pipeline and path must be given");
    brg_checkpoint_manifest m;
    brg_file_sum sums[2];
    const brg_status read = read_manifest(path, &m, sums);
    brg_status st = brg_state_together(pl, read, "reading the checkpoint");
    if (st == BRG_OK) st = brg_checkpoint_load_listed(pl, path, &m);
    if (read == BRG_OK) brg_checkpoint_manifest_free(&m);
    return st;
}

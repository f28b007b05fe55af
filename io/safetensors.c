/* Safetensors files (brigade/safetensors.h): written atomically, read
 * whole and checked before anything is handed out. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/internal.h"
#include "brigade/safetensors.h"
#include "files.h"

/* A header larger than this is damage, not a model (safetensors' own
 * readers stop at 100 MB too). */
#define HEADER_MAX ((uint64_t)100 << 20)
#define META_KEY "__metadata__"

/* Element sizes of the dtypes safetensors names; brigade computes in the
 * first two. */
static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    {"F32", 4}, {"I32", 4}, {"F64", 8}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I16", 2}, {"I8", 1},
    {"U8", 1},  {"U16", 2}, {"U32", 4}, {"U64", 8}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
};
#define N_DTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

static const char *brg_dtype_file_name(brg_dtype d) { return d == BRG_F32 ? "F32" : "I32"; }

static int little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* ---- writing ---- */

static brg_status check_tensor(const char *path, const brg_safetensor *t, int index)
{
    if (!t->name || !t->name[0] || strcmp(t->name, META_KEY) == 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor %d has no name, or the reserved name " META_KEY, path,
                         index);
    if (t->dtype != BRG_F32 && t->dtype != BRG_I32)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has dtype %d; brigade writes F32 and I32", path,
                         t->name, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > BRG_SAFETENSORS_MAX_DIMS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has %d dimensions (0..%d)", path, t->name, t->ndim,
                         BRG_SAFETENSORS_MAX_DIMS);
    size_t count = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has extent %lld", path, t->name,
                             (long long)t->shape[d]);
        count *= (size_t)t->shape[d];
    }
    if (count * brg_dtype_size(t->dtype) != t->bytes || (t->bytes && !t->data))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has %zu bytes for %zu elements", path, t->name,
                         t->bytes, count);
    return BRG_OK;
}

/* The header's JSON text, padded with spaces to a multiple of 8. */
static brg_status header_text(const char *path, const brg_safetensor *ts, int n, const char *const *keys,
                              const char *const *values, int n_meta, char **out, size_t *length)
{
    json_t *root = json_object();
    brg_status st = root ? BRG_OK : BRG_ERR_HOST_MEMORY;
    if (st == BRG_OK && n_meta > 0) {
        json_t *meta = json_object();
        for (int i = 0; i < n_meta && meta; i++)
            if (!keys[i] || !values[i] || json_object_set_new(meta, keys[i], json_string(values[i])) != 0) {
                st = brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: metadata %d is not a pair of UTF-8 strings", path, i);
                break;
            }
        if (!meta || json_object_set_new(root, META_KEY, meta) != 0) st = BRG_ERR_HOST_MEMORY;
    }
    uint64_t at = 0;
    for (int i = 0; i < n && st == BRG_OK; i++) {
        st = check_tensor(path, &ts[i], i);
        if (st != BRG_OK) break;
        if (json_object_get(root, ts[i].name)) {
            st = brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: two tensors are named '%s'", path, ts[i].name);
            break;
        }
        json_t *shape = json_array();
        for (int d = 0; d < ts[i].ndim && shape; d++) json_array_append_new(shape, json_integer(ts[i].shape[d]));
        json_t *entry = json_pack("{s:s, s:o, s:[I, I]}", "dtype", brg_dtype_file_name(ts[i].dtype), "shape", shape,
                                  "data_offsets", (json_int_t)at, (json_int_t)(at + ts[i].bytes));
        if (!entry || json_object_set_new(root, ts[i].name, entry) != 0)
            st = brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor '%s': not valid UTF-8, or no host memory", path,
                           ts[i].name);
        at += ts[i].bytes;
    }
    char *text = st == BRG_OK ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (st != BRG_OK) return st;
    if (!text) return brg_error(BRG_ERR_HOST_MEMORY, "%s: no host memory for the header", path);
    const size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    char *p = realloc(text, padded + 1);
    if (!p) {
        free(text);
        return brg_error(BRG_ERR_HOST_MEMORY, "%s: no host memory for the header", path);
    }
    memset(p + len, ' ', padded - len);
    p[padded] = '\0';
    *out = p;
    *length = padded;
    return BRG_OK;
}

brg_status brg_safetensors_write(const char *path, const brg_safetensor *ts, int n, const char *const *keys,
                                 const char *const *values, int n_meta)
{
    if (!path || n < 0 || (n > 0 && !ts) || n_meta < 0 || (n_meta > 0 && (!keys || !values)))
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_safetensors_write: a path, and tensors and metadata as counted");
    if (!little_endian())
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: safetensors files need a little-endian host", path);
    char *header = NULL;
    size_t header_len = 0;
    BRG_CHECK(header_text(path, ts, n, keys, values, n_meta, &header, &header_len));
    /* One buffer: length, header, data; then one write to a temporary
     * name, flushed, renamed over path, and the folder flushed. */
    size_t total = 8 + header_len;
    for (int i = 0; i < n; i++) total += ts[i].bytes;
    unsigned char *buf = brg_malloc(total, "a safetensors file");
    if (!buf) {
        free(header);
        return BRG_ERR_HOST_MEMORY;
    }
    const uint64_t n64 = header_len;
    memcpy(buf, &n64, 8);
    memcpy(buf + 8, header, header_len);
    free(header);
    size_t at = 8 + header_len;
    for (int i = 0; i < n; i++) {
        if (ts[i].bytes) memcpy(buf + at, ts[i].data, ts[i].bytes);
        at += ts[i].bytes;
    }
    const brg_status st = brg_io_replace_synced(path, buf, total);
    free(buf);
    return st;
}

/* ---- reading ---- */

typedef struct entry {
    char *name;
    int dtype;                 /* index into dtypes */
    int ndim;
    int64_t shape[BRG_SAFETENSORS_MAX_DIMS];
    uint64_t begin, end;       /* in the data */
} entry;

struct brg_safetensors {
    char *path;
    unsigned char *bytes;      /* the whole file, or its header alone */
    size_t header_bytes;       /* the JSON's, after the 8 bytes of its length */
    const unsigned char *data; /* after the header; NULL when only the header was read */
    uint64_t data_bytes;
    entry *entries;            /* sorted by begin */
    int n;
    json_t *meta;              /* "__metadata__" or NULL */
};

static brg_status bad(const brg_safetensors *f, const char *tensor, const char *what)
{
    if (tensor) return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s': %s", f->path, tensor, what);
    return brg_error(BRG_ERR_FORMAT, "%s: %s", f->path, what);
}

/* The 8 bytes of the header's length, checked against the file's size. */
static brg_status header_length(brg_safetensors *f, const unsigned char *first8, size_t size)
{
    uint64_t header_len;
    memcpy(&header_len, first8, 8);
    if (header_len > HEADER_MAX || header_len > size - 8) {
        char what[160];
        snprintf(what, sizeof what, "a header of %llu bytes in a file of %zu (truncated, or not safetensors)",
                 (unsigned long long)header_len, size);
        return bad(f, NULL, what);
    }
    f->header_bytes = (size_t)header_len;
    f->data_bytes = size - 8 - header_len;
    return BRG_OK;
}

/* The whole file into f->bytes (whole), or its length and header alone:
 * what the header says is checked against the file's size either way. */
static brg_status read_file(brg_safetensors *f, int whole, brg_safetensors_check_fn check, void *ctx)
{
    FILE *in;
    BRG_CHECK(brg_open_regular(f->path, "the safetensors file", &in));
    struct stat sb;
    brg_status st = BRG_OK;
    if (fstat(fileno(in), &sb) != 0) st = brg_error(BRG_ERR_IO, "cannot read %s: %s", f->path, strerror(errno));
    const size_t size = st == BRG_OK ? (size_t)sb.st_size : 0;
    if (st == BRG_OK && size < 8)
        st = bad(f, NULL, "shorter than the 8 bytes of a header length (an empty or truncated file)");
    unsigned char first8[8];
    if (st == BRG_OK && !whole) {
        if (fread(first8, 1, 8, in) != 8)
            st = brg_error(BRG_ERR_IO, "cannot read %s: %s", f->path, ferror(in) ? strerror(errno) : "it shrank");
        if (st == BRG_OK) st = header_length(f, first8, size);
    }
    const size_t want = whole ? size : 8 + f->header_bytes, had = whole ? 0 : 8;
    if (st == BRG_OK) {
        f->bytes = brg_malloc(want, "a safetensors file");
        if (!f->bytes) st = BRG_ERR_HOST_MEMORY;
        else if (!whole) memcpy(f->bytes, first8, 8);
        if (st == BRG_OK && fread(f->bytes + had, 1, want - had, in) != want - had)
            st = brg_error(BRG_ERR_IO, "cannot read %s: %s", f->path, ferror(in) ? strerror(errno) : "it shrank");
    }
    fclose(in);
    if (st == BRG_OK && check) st = check(ctx, f->path, f->bytes, size);
    if (st == BRG_OK && whole) st = header_length(f, f->bytes, size);
    if (st == BRG_OK && whole) f->data = f->bytes + 8 + f->header_bytes;
    return st;
}

static int find_dtype(const char *name)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (strcmp(dtypes[i].name, name) == 0) return i;
    return -1;
}

/* One header entry: {"dtype", "shape", "data_offsets"} and nothing else. */
static brg_status parse_entry(brg_safetensors *f, const char *name, json_t *v, entry *e)
{
    json_t *dtype = NULL, *shape = NULL, *offsets = NULL;
    json_error_t jerr;
    if (!json_is_object(v) || json_unpack_ex(v, &jerr, JSON_STRICT, "{s:o, s:o, s:o}", "dtype", &dtype, "shape",
                                             &shape, "data_offsets", &offsets) != 0)
        return bad(f, name, "not an object of exactly dtype, shape and data_offsets");
    if (!json_is_string(dtype) || (e->dtype = find_dtype(json_string_value(dtype))) < 0)
        return bad(f, name, "an unknown dtype");
    if (!json_is_array(shape) || json_array_size(shape) > BRG_SAFETENSORS_MAX_DIMS)
        return bad(f, name, "its shape is not an array of at most 8 extents");
    e->ndim = (int)json_array_size(shape);
    uint64_t count = 1;
    for (int d = 0; d < e->ndim; d++) {
        json_t *x = json_array_get(shape, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 0) return bad(f, name, "an extent is not an integer >= 0");
        e->shape[d] = (int64_t)json_integer_value(x);
        if (e->shape[d] && count > f->data_bytes / (uint64_t)e->shape[d]) count = f->data_bytes + 1; /* too big */
        else count *= (uint64_t)e->shape[d];
    }
    json_t *b = json_array_get(offsets, 0), *en = json_array_get(offsets, 1);
    if (!json_is_array(offsets) || json_array_size(offsets) != 2 || !json_is_integer(b) || !json_is_integer(en) ||
        json_integer_value(b) < 0 || json_integer_value(en) < json_integer_value(b))
        return bad(f, name, "data_offsets is not [BEGIN, END] with 0 <= BEGIN <= END");
    e->begin = (uint64_t)json_integer_value(b);
    e->end = (uint64_t)json_integer_value(en);
    if (e->end > f->data_bytes) return bad(f, name, "its data runs past the end of the file (truncated?)");
    if (count > f->data_bytes || e->end - e->begin != count * dtypes[e->dtype].size)
        return bad(f, name, "its data_offsets do not span its shape's elements");
    e->name = brg_malloc(strlen(name) + 1, "a tensor name");
    if (!e->name) return BRG_ERR_HOST_MEMORY;
    strcpy(e->name, name);
    return BRG_OK;
}

/* "__metadata__": an object of strings. */
static brg_status parse_metadata(brg_safetensors *f, json_t *meta)
{
    if (!json_is_object(meta)) return bad(f, NULL, META_KEY " is not an object");
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v) {
        if (!json_is_string(v)) return bad(f, NULL, META_KEY " holds a value that is not a string");
    }
    f->meta = json_incref(meta);
    return BRG_OK;
}

static int by_begin(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static brg_status parse_header(brg_safetensors *f)
{
    const char *text = (const char *)f->bytes + 8;
    const size_t len = f->header_bytes;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        char what[256];
        snprintf(what, sizeof what, "its header is not JSON: %s (at byte %d of it)", jerr.text, jerr.position);
        return bad(f, NULL, what);
    }
    brg_status st = json_is_object(root) ? BRG_OK : bad(f, NULL, "its header is not a JSON object");
    const size_t n = st == BRG_OK ? json_object_size(root) : 0;
    f->entries = brg_calloc(n ? n : 1, sizeof *f->entries, "a safetensors header");
    if (st == BRG_OK && !f->entries) st = BRG_ERR_HOST_MEMORY;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (st != BRG_OK) break;
        if (strcmp(key, META_KEY) == 0) {
            st = parse_metadata(f, v);
            continue;
        }
        st = parse_entry(f, key, v, &f->entries[f->n]);
        if (st == BRG_OK) f->n++;
    }
    json_decref(root);
    if (st != BRG_OK) return st;
    /* The data is tiled: sorted by offset, each starts where the last ended. */
    qsort(f->entries, (size_t)f->n, sizeof *f->entries, by_begin);
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        if (f->entries[i].begin != at)
            return bad(f, f->entries[i].name,
                       f->entries[i].begin < at ? "its data overlaps another tensor's" : "a gap before its data");
        at = f->entries[i].end;
    }
    if (at != f->data_bytes) return bad(f, NULL, "bytes after the last tensor's data");
    return BRG_OK;
}

brg_status brg_safetensors_open(const char *path, brg_safetensors **out)
{
    return brg_safetensors_open_checked(path, NULL, NULL, out);
}

static brg_status open_file(const char *path, int whole, brg_safetensors_check_fn check, void *ctx,
                            brg_safetensors **out)
{
    if (!path || !out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_safetensors_open: path and out must be given");
    *out = NULL;
    if (!little_endian())
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: safetensors files need a little-endian host", path);
    brg_safetensors *f = brg_calloc(1, sizeof *f, "a safetensors file");
    if (!f) return BRG_ERR_HOST_MEMORY;
    f->path = brg_malloc(strlen(path) + 1, "a file name");
    brg_status st = f->path ? BRG_OK : BRG_ERR_HOST_MEMORY;
    if (st == BRG_OK) {
        strcpy(f->path, path);
        st = read_file(f, whole, check, ctx);
    }
    if (st == BRG_OK) st = parse_header(f);
    if (st != BRG_OK) {
        brg_safetensors_close(f);
        return st;
    }
    *out = f;
    return BRG_OK;
}

brg_status brg_safetensors_open_checked(const char *path, brg_safetensors_check_fn check, void *ctx,
                                        brg_safetensors **out)
{
    return open_file(path, 1, check, ctx, out);
}

brg_status brg_safetensors_open_header(const char *path, brg_safetensors **out)
{
    return open_file(path, 0, NULL, NULL, out);
}

void brg_safetensors_close(brg_safetensors *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->entries[i].name);
    free(f->entries);
    json_decref(f->meta);
    free(f->bytes);
    free(f->path);
    free(f);
}

const char *brg_safetensors_path(const brg_safetensors *f) { return f ? f->path : NULL; }
int brg_safetensors_count(const brg_safetensors *f) { return f ? f->n : 0; }

const char *brg_safetensors_dtype_name(const brg_safetensors *f, int i)
{
    return f && i >= 0 && i < f->n ? dtypes[f->entries[i].dtype].name : NULL;
}

brg_status brg_safetensors_get(const brg_safetensors *f, int i, brg_safetensor *out)
{
    if (!f || !out || i < 0 || i >= f->n)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_safetensors_get: tensor %d of %d", i, f ? f->n : 0);
    const entry *e = &f->entries[i];
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->ndim = e->ndim;
    memcpy(out->shape, e->shape, sizeof e->shape);
    out->bytes = (size_t)(e->end - e->begin);
    const char *dt = dtypes[e->dtype].name;
    if (strcmp(dt, "F32") != 0 && strcmp(dt, "I32") != 0) {
        out->bytes = 0;
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: tensor '%s' is %s; brigade reads F32 and I32 tensors", f->path,
                         e->name, dt);
    }
    out->dtype = strcmp(dt, "F32") == 0 ? BRG_F32 : BRG_I32;
    out->data = f->data ? f->data + e->begin : NULL;
    return BRG_OK;
}

int brg_safetensors_find(const brg_safetensors *f, const char *name)
{
    if (!f || !name) return -1;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->entries[i].name, name) == 0) return i;
    return -1;
}

const char *brg_safetensors_metadata(const brg_safetensors *f, const char *key)
{
    if (!f || !f->meta || !key) return NULL;
    return json_string_value(json_object_get(f->meta, key));
}

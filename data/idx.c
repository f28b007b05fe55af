/* IDX files (the Fashion-MNIST format) read through zlib into host data sets.
 *
 * An IDX file is a 4-byte magic number (0, 0, element type, number of
 * dimensions), one big-endian uint32 per dimension, then the elements in
 * row-major order. Only unsigned bytes (type 0x08) occur in Fashion-MNIST.
 * gzread reads gzip files and, transparently, plain ones, so both work.
 *
 * Every byte count is checked against what the header declares, and the
 * stream is read to its very end, so zlib verifies the gzip CRC and length
 * and any bytes after the declared payload are found. Output arrays grow with
 * the data that actually arrives, so a header that claims a huge count costs
 * only what the file really holds before the shortfall is reported.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "brigade/data.h"
#include "base/rng.h"
#include "base/internal.h"

#ifndef BRG_FASHION_MNIST_DIR
#define BRG_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#endif

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_TYPE_UBYTE 0x08

/* Bytes handed to one gzread, and the zlib input buffer. */
#define IDX_CHUNK (1u << 20)
#define IDX_GZBUFFER (128u * 1024u)
/* Elements allocated before the data has shown the header to be honest;
 * beyond this the output doubles as bytes arrive. */
#define IDX_FIRST_ALLOC (INT64_C(1) << 22)
/* Trailing bytes counted before the report says "at least". */
#define IDX_TRAILING_COUNT_MAX (INT64_C(1) << 26)

#define INSTALL_HINT                                                                                   \
    " (install it with `apt-get install dataset-fashion-mnist`, or point --data-dir or "              \
    "BRIGADE_DATA_DIR at a folder holding the Fashion-MNIST IDX files)"

typedef struct idx_file {
    gzFile gz;
    const char *path;
    int64_t pos;        /* decompressed bytes consumed so far */
    int64_t end;        /* where the region being read ends: header, then header + payload */
    const char *region; /* what that region is, for messages */
} idx_file;

/* What a caller demands of a file beyond the IDX format itself; zero means
 * "anything". */
typedef struct idx_want {
    const char *open_hint;     /* appended when the file does not exist */
    int64_t count;             /* required number of items ... */
    const char *count_file;    /* ... because this other file holds that many */
    int height, width;         /* required image size */
    const char *size_name;     /* data set the size belongs to, for messages */
    int classes;               /* labels must lie in 0..classes-1 */
} idx_want;

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* zlib's messages start with the path it was opened with; drop it, since
 * ours name the file already. */
static const char *zlib_reason(const char *msg, const char *path)
{
    size_t n = strlen(path);
    if (msg && strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') return msg + n + 2;
    return msg ? msg : "unknown zlib error";
}

/* Open path for reading. Fails with BRG_ERR_IO (naming the file and the
 * system's reason, plus hint when the file does not exist) or
 * BRG_ERR_HOST_MEMORY when zlib cannot allocate its state. */
static brg_status idx_open(idx_file *f, const char *path, const char *hint)
{
    f->path = path;
    f->pos = 0;
    f->end = 0;
    f->region = "header";
    /* Only a regular file: opening a FIFO would wait for a writer forever. */
    FILE *file;
    const brg_status st = brg_open_regular(path, "IDX file", &file);
    if (st != BRG_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", brg_last_error());
        const int missing = access(path, F_OK) != 0 && (errno == ENOENT || errno == ENOTDIR);
        return brg_error(st, "%s%s", msg, hint && missing ? hint : "");
    }
    const int fd = dup(fileno(file));
    fclose(file);
    f->gz = fd >= 0 ? gzdopen(fd, "rb") : NULL;
    if (!f->gz) {
        if (fd >= 0) close(fd);
        return brg_error(fd >= 0 ? BRG_ERR_HOST_MEMORY : BRG_ERR_IO, "cannot open %s: %s", path,
                         fd >= 0 ? "zlib could not allocate its state" : strerror(errno));
    }
    /* A larger input buffer than zlib's 8 KiB default; it can only fail
     * after the first read, which has not happened. */
    gzbuffer(f->gz, IDX_GZBUFFER);
    return BRG_OK;
}

static void idx_close(idx_file *f)
{
    if (f->gz) gzclose(f->gz);
    f->gz = NULL;
}

/* The stream stopped before f->end: turn zlib's state into a status and a
 * message naming the file, the position and the reason. */
static brg_status idx_short(idx_file *f)
{
    int zerr = Z_OK;
    const char *zmsg = zlib_reason(gzerror(f->gz, &zerr), f->path);
    z_off_t at = gztell(f->gz);
    if (at > f->pos) f->pos = (int64_t)at;
    const long long pos = (long long)f->pos, end = (long long)f->end;

    switch (zerr) {
    case Z_OK:
    case Z_STREAM_END:
        return brg_error(BRG_ERR_FORMAT, "%s is truncated: it ends after %lld of %lld bytes (%s)", f->path, pos,
                         end, f->region);
    case Z_BUF_ERROR:
        return brg_error(BRG_ERR_FORMAT,
                         "%s is truncated: its gzip stream is cut off (zlib: %s) and ends after %lld of %lld "
                         "bytes (%s)",
                         f->path, zmsg, pos, end, f->region);
    case Z_DATA_ERROR:
        /* zlib inflates ahead of what it hands out, so the damage lies
         * somewhere after pos, not at it. */
        if (pos == 0) return brg_error(BRG_ERR_FORMAT, "%s is corrupt: bad gzip data (zlib: %s)", f->path, zmsg);
        return brg_error(BRG_ERR_FORMAT, "%s is corrupt: bad gzip data after the first %lld of %lld bytes (zlib: %s)",
                         f->path, pos, end, zmsg);
    case Z_ERRNO:
        if (pos == 0) return brg_error(BRG_ERR_IO, "cannot read %s: %s", f->path, zmsg);
        return brg_error(BRG_ERR_IO, "cannot read %s after %lld bytes: %s", f->path, pos, zmsg);
    case Z_MEM_ERROR:
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot read %s: zlib is out of memory", f->path);
    default:
        return brg_error(BRG_ERR_FORMAT, "cannot read %s after %lld bytes: zlib error %d (%s)", f->path, pos, zerr,
                         zmsg);
    }
}

/* Read exactly n bytes or fail through idx_short. */
static brg_status idx_read(idx_file *f, unsigned char *buf, size_t n)
{
    while (n > 0) {
        unsigned want = n > IDX_CHUNK ? IDX_CHUNK : (unsigned)n;
        int got = gzread(f->gz, buf, want);
        if (got <= 0) return idx_short(f);
        f->pos += got;
        buf += got;
        n -= (size_t)got;
    }
    return BRG_OK;
}

/* Everything the header declared has been read: read on to the end of the
 * stream, so that zlib checks the gzip trailer (CRC and length), and fail
 * if there is anything more. zlib itself ignores non-gzip bytes after the
 * last gzip member; a second gzip member counts as trailing data. */
static brg_status idx_expect_end(idx_file *f)
{
    unsigned char buf[4096];
    int64_t extra = 0;
    int got;
    while ((got = gzread(f->gz, buf, sizeof buf)) > 0 && extra < IDX_TRAILING_COUNT_MAX) extra += got;
    if (got > 0) extra += got;

    int zerr = Z_OK;
    const char *zmsg = zlib_reason(gzerror(f->gz, &zerr), f->path);
    const long long pos = (long long)f->pos;
    if (zerr == Z_DATA_ERROR)
        return brg_error(BRG_ERR_FORMAT,
                         "%s is corrupt: its gzip stream fails its check after all %lld bytes (zlib: %s)", f->path,
                         pos, zmsg);
    if (zerr == Z_BUF_ERROR)
        return brg_error(BRG_ERR_FORMAT,
                         "%s is truncated: its gzip stream is cut off after all %lld bytes of data (zlib: %s)",
                         f->path, pos, zmsg);
    if (zerr != Z_OK && zerr != Z_STREAM_END) {
        f->region = "end of file";
        f->end = f->pos;
        return idx_short(f);
    }
    if (extra > 0)
        return brg_error(BRG_ERR_FORMAT,
                         "%s has %s%lld byte%s of trailing data after the %lld bytes its header declares", f->path,
                         got > 0 ? "at least " : "", (long long)extra, extra == 1 ? "" : "s", pos);
    return BRG_OK;
}

/* Read and check the magic number and the dimensions. dims receives ndim
 * values. Fails with BRG_ERR_FORMAT naming what was found and expected. */
static brg_status idx_header(idx_file *f, uint32_t magic, const char *kind, uint32_t *dims)
{
    unsigned char head[4 + 4 * 3];
    const int ndim = (int)(magic & 0xffu);
    f->end = 4;
    f->region = "magic number";
    BRG_CHECK(idx_read(f, head, 4));
    const uint32_t found = be32(head);
    if (found != magic) {
        const char *why = "";
        if (found == IDX_MAGIC_LABELS) why = "; this is an IDX label file";
        else if (found == IDX_MAGIC_IMAGES) why = "; this is an IDX image file";
        else if (head[0] == 0x1f && head[1] == 0x8b) why = "; it is gzip compressed twice";
        else if (head[0] != 0 || head[1] != 0) why = "; this is not an IDX file";
        else if (head[2] != IDX_TYPE_UBYTE) why = "; its elements are not unsigned bytes";
        return brg_error(BRG_ERR_FORMAT,
                         "%s has the wrong magic number 0x%08x; expected 0x%08x (IDX %s: unsigned bytes, %d "
                         "dimension%s)%s",
                         f->path, (unsigned)found, (unsigned)magic, kind, ndim, ndim == 1 ? "" : "s", why);
    }
    f->end = 4 + 4 * ndim;
    f->region = "header";
    BRG_CHECK(idx_read(f, head + 4, (size_t)(4 * ndim)));
    for (int d = 0; d < ndim; d++) dims[d] = be32(head + 4 + 4 * d);
    if (dims[0] == 0) return brg_error(BRG_ERR_FORMAT, "%s declares 0 %s; it must hold at least one", f->path, kind);
    if ((int64_t)dims[0] > BRG_IDX_MAX_COUNT)
        return brg_error(BRG_ERR_FORMAT, "%s declares %lu %s, more than the sane limit of %lld", f->path,
                         (unsigned long)dims[0], kind, (long long)BRG_IDX_MAX_COUNT);
    return BRG_OK;
}

/* Read items * item_bytes payload bytes into a new array of items * item_bytes
 * 4-byte elements (floats scaled to [0, 1], or int32 copies of the bytes).
 * The array grows with the data read; *out is NULL on failure. */
static brg_status idx_payload(idx_file *f, int64_t items, int64_t item_bytes, int as_float, void **out)
{
    brg_status ret = BRG_OK;
    const int64_t nbytes = items * item_bytes; /* the header checks keep this below 2^57 */
    unsigned char *stage = NULL;
    unsigned char *data = NULL;
    float scale[256];
    *out = NULL;

    if ((uint64_t)nbytes > SIZE_MAX / 4)
        return brg_error(BRG_ERR_HOST_MEMORY, "%s declares %lld bytes of data, too many for this machine's memory",
                         f->path, (long long)nbytes);
    for (int v = 0; v < 256; v++) scale[v] = (float)v / 255.0f;

    int64_t cap = nbytes < IDX_FIRST_ALLOC ? nbytes : IDX_FIRST_ALLOC;
    data = brg_malloc((size_t)cap * 4, "IDX data");
    stage = brg_malloc(nbytes < (int64_t)IDX_CHUNK ? (size_t)nbytes : IDX_CHUNK, "IDX read buffer");
    if (!data || !stage) {
        ret = BRG_ERR_HOST_MEMORY;
        goto fail;
    }

    f->end = f->pos + nbytes;
    for (int64_t done = 0; done < nbytes;) {
        const size_t n = nbytes - done < (int64_t)IDX_CHUNK ? (size_t)(nbytes - done) : IDX_CHUNK;
        if (done + (int64_t)n > cap) {
            int64_t grown = cap * 2 > done + (int64_t)n ? cap * 2 : done + (int64_t)n;
            if (grown > nbytes) grown = nbytes;
            unsigned char *more = realloc(data, (size_t)grown * 4);
            if (!more) {
                ret = brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate %lld bytes of host memory for %s",
                                (long long)grown * 4, f->path);
                goto fail;
            }
            data = more;
            cap = grown;
        }
        BRG_CHECK_GOTO(idx_read(f, stage, n), ret, fail);
        if (as_float) {
            float *dst = (float *)data + done;
            for (size_t i = 0; i < n; i++) dst[i] = scale[stage[i]];
        } else {
            int32_t *dst = (int32_t *)data + done;
            for (size_t i = 0; i < n; i++) dst[i] = stage[i];
        }
        done += (int64_t)n;
    }
    BRG_CHECK_GOTO(idx_expect_end(f), ret, fail);
    *out = data;
    data = NULL;

exit:
    free(stage);
    return ret;
fail:
    free(data);
    goto exit;
}

static brg_status read_images(const char *path, const idx_want *want, int64_t *count, int *height, int *width,
                              float **images)
{
    brg_status ret = BRG_OK;
    idx_file f = {0};
    uint32_t dims[3];
    void *data = NULL;

    BRG_CHECK_GOTO(idx_open(&f, path, want->open_hint), ret, exit);
    BRG_CHECK_GOTO(idx_header(&f, IDX_MAGIC_IMAGES, "images", dims), ret, exit);
    const int64_t n = dims[0], h = dims[1], w = dims[2];
    /* Divided, not multiplied: two sides near 2^32 overflow the product. */
    if (h == 0 || w == 0 || w > BRG_IDX_MAX_ITEM_BYTES / h) {
        ret = brg_error(BRG_ERR_FORMAT,
                        "%s declares images of %lld rows x %lld columns; each side must be at least 1 and an image "
                        "at most %lld bytes",
                        path, (long long)h, (long long)w, (long long)BRG_IDX_MAX_ITEM_BYTES);
        goto exit;
    }
    if (want->height && (h != want->height || w != want->width)) {
        ret = brg_error(BRG_ERR_FORMAT, "%s holds %lldx%lld images; %s images are %dx%d", path, (long long)h,
                        (long long)w, want->size_name, want->height, want->width);
        goto exit;
    }
    if (want->count_file && n != want->count) {
        ret = brg_error(BRG_ERR_FORMAT, "%s holds %lld images but %s holds %lld labels; they must agree", path,
                        (long long)n, want->count_file, (long long)want->count);
        goto exit;
    }
    f.region = "header and pixels";
    BRG_CHECK_GOTO(idx_payload(&f, n, h * w, 1, &data), ret, exit);
    *count = n;
    *height = (int)h;
    *width = (int)w;
    *images = data;

exit:
    idx_close(&f);
    return ret;
}

static brg_status read_labels(const char *path, const idx_want *want, int64_t *count, int32_t **labels)
{
    brg_status ret = BRG_OK;
    idx_file f = {0};
    uint32_t dims[1];
    void *data = NULL;

    BRG_CHECK_GOTO(idx_open(&f, path, want->open_hint), ret, exit);
    BRG_CHECK_GOTO(idx_header(&f, IDX_MAGIC_LABELS, "labels", dims), ret, exit);
    const int64_t n = dims[0];
    f.region = "header and labels";
    BRG_CHECK_GOTO(idx_payload(&f, n, 1, 0, &data), ret, exit);
    if (want->classes > 0) {
        const int32_t *lab = data;
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; i++) {
            if (lab[i] >= want->classes) {
                if (first < 0) first = i;
                bad++;
            }
        }
        if (bad) {
            ret = brg_error(BRG_ERR_FORMAT, "%s: label %d of sample %lld is outside 0..%d (%lld bad label%s in all)",
                            path, (int)lab[first], (long long)first, want->classes - 1, (long long)bad,
                            bad == 1 ? "" : "s");
            free(data);
            goto exit;
        }
    }
    *count = n;
    *labels = data;

exit:
    idx_close(&f);
    return ret;
}

brg_status brg_idx_read_images(const char *path, int64_t *count, int *height, int *width, float **images)
{
    const idx_want any = {0};
    if (count) *count = 0;
    if (height) *height = 0;
    if (width) *width = 0;
    if (images) *images = NULL;
    if (!path || !count || !height || !width || !images)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_idx_read_images: path and every output must be given");
    return read_images(path, &any, count, height, width, images);
}

brg_status brg_idx_read_labels(const char *path, int64_t *count, int32_t **labels)
{
    const idx_want any = {0};
    if (count) *count = 0;
    if (labels) *labels = NULL;
    if (!path || !count || !labels)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_idx_read_labels: path and every output must be given");
    return read_labels(path, &any, count, labels);
}

const char *brg_fashion_mnist_default_dir(void)
{
    const char *env = getenv("BRIGADE_DATA_DIR");
    return env && env[0] ? env : BRG_FASHION_MNIST_DIR;
}

/* "<dir>/<name>.gz", or "<dir>/<name>" when only the uncompressed file
 * exists. NULL (message set) when malloc fails. */
static char *data_file(const char *dir, const char *name)
{
    const size_t len = strlen(dir) + 1 + strlen(name) + sizeof ".gz";
    char *path = brg_malloc(len, "a file name");
    if (!path) return NULL;
    const size_t dl = strlen(dir);
    snprintf(path, len, "%s%s%s.gz", dir, dl && dir[dl - 1] == '/' ? "" : "/", name);
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        path[strlen(path) - 3] = '\0';
        if (access(path, F_OK) != 0) strcat(path, ".gz"); /* report the name the package installs */
    }
    return path;
}

brg_status brg_fashion_mnist_load(const char *dir, brg_split split, brg_dataset **out)
{
    brg_status ret = BRG_OK;
    char *image_path = NULL, *label_path = NULL;
    brg_dataset *ds = NULL;

    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_fashion_mnist_load: out is NULL");
    *out = NULL;
    if (split != BRG_SPLIT_TRAIN && split != BRG_SPLIT_TEST)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_fashion_mnist_load: unknown split %d", (int)split);
    /* A folder given that is there may hold any IDX files in the MNIST
     * layout, some missing: the hint to install Fashion-MNIST is for the
     * default folder, or one that is not there. */
    const int given = dir && dir[0];
    struct stat sb;
    const int own = given && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode);
    const char *hint = own ? " (a folder of IDX files in the MNIST layout holds the train- and t10k- images and "
                             "labels)"
                           : INSTALL_HINT;
    if (!given) dir = brg_fashion_mnist_default_dir();
    const char *prefix = split == BRG_SPLIT_TRAIN ? "train" : "t10k";
    char name[64];

    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    image_path = data_file(dir, name);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    label_path = data_file(dir, name);
    ds = brg_calloc(1, sizeof *ds, "a data set");
    if (!image_path || !label_path || !ds) {
        ret = BRG_ERR_HOST_MEMORY;
        goto fail;
    }
    ds->channels = 1;
    ds->classes = BRG_FASHION_MNIST_CLASSES;

    /* Labels first: they are small, and their count lets the image header be
     * rejected before 47 MB of pixels are inflated. */
    const idx_want want_labels = {.open_hint = hint, .classes = BRG_FASHION_MNIST_CLASSES};
    BRG_CHECK_GOTO(read_labels(label_path, &want_labels, &ds->count, &ds->labels), ret, fail);
    const idx_want want_images = {
        .open_hint = hint,
        .count = ds->count,
        .count_file = label_path,
        .height = BRG_FASHION_MNIST_SIDE,
        .width = BRG_FASHION_MNIST_SIDE,
        .size_name = own ? "the MNIST layout's" : "Fashion-MNIST",
    };
    int64_t n = 0;
    BRG_CHECK_GOTO(read_images(image_path, &want_images, &n, &ds->height, &ds->width, &ds->images), ret, fail);
    *out = ds;
    ds = NULL;

exit:
    free(image_path);
    free(label_path);
    return ret;
fail:
    brg_dataset_destroy(ds);
    goto exit;
}

void brg_dataset_destroy(brg_dataset *ds)
{
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    free(ds);
}

int64_t brg_dataset_sample_size(const brg_dataset *ds)
{
    return ds ? (int64_t)ds->channels * ds->height * ds->width : 0;
}

static void copy_sample(const brg_dataset *ds, int64_t from, int64_t to, float *images, int32_t *labels)
{
    const int64_t size = brg_dataset_sample_size(ds);
    if (images) memcpy(images + to * size, ds->images + from * size, (size_t)size * sizeof(float));
    if (labels) labels[to] = ds->labels[from];
}

brg_status brg_dataset_batch(const brg_dataset *ds, int64_t start, int64_t n, float *images, int32_t *labels)
{
    if (!ds) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_dataset_batch: the data set is NULL");
    if (n < 0 || start < 0 || start > ds->count || n > ds->count - start)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_dataset_batch: samples [%lld, %lld + %lld) are not inside the %lld of the data set",
                         (long long)start, (long long)start, (long long)n, (long long)ds->count);
    if ((images && !ds->images) || (labels && !ds->labels))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_dataset_batch: the data set has no %s",
                         images && !ds->images ? "images" : "labels");
    const int64_t size = brg_dataset_sample_size(ds);
    if (images && n) memcpy(images, ds->images + start * size, (size_t)(n * size) * sizeof(float));
    if (labels && n) memcpy(labels, ds->labels + start, (size_t)n * sizeof(int32_t));
    return BRG_OK;
}

brg_status brg_dataset_gather(const brg_dataset *ds, const int64_t *index, int64_t n, float *images,
                              int32_t *labels)
{
    if (!ds) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_dataset_gather: the data set is NULL");
    if (n < 0 || (n > 0 && !index))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_dataset_gather: %lld samples from %s index array",
                         (long long)n, index ? "an" : "a NULL");
    if ((images && !ds->images) || (labels && !ds->labels))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_dataset_gather: the data set has no %s",
                         images && !ds->images ? "images" : "labels");
    for (int64_t i = 0; i < n; i++)
        if (index[i] < 0 || index[i] >= ds->count)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "brg_dataset_gather: index[%lld] = %lld is outside the data set's 0..%lld",
                             (long long)i, (long long)index[i], (long long)ds->count - 1);
    for (int64_t i = 0; i < n; i++) copy_sample(ds, index[i], i, images, labels);
    return BRG_OK;
}

/* The splitmix64 generator: the state advances by the golden-ratio step
 * and each draw mixes the advanced state (brg_splitmix64 of the state
 * before the step, since it adds the step itself). */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = *state;
    *state += UINT64_C(0x9e3779b97f4a7c15);
    return brg_splitmix64(z);
}

/* A uniform value in 0..bound-1 (bound >= 1), without modulo bias: draws
 * below 2^64 mod bound are thrown away. */
static uint64_t uniform_below(uint64_t *state, uint64_t bound)
{
    const uint64_t reject = (0 - bound) % bound;
    uint64_t r;
    do r = splitmix64(state);
    while (r < reject);
    return r % bound;
}

brg_status brg_shuffle_indices(int64_t *order, int64_t n, uint64_t seed)
{
    if (n < 0 || (n > 0 && !order))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_shuffle_indices: %lld indices into %s", (long long)n,
                         order ? "an array" : "NULL");
    uint64_t state = seed;
    for (int64_t i = 0; i < n; i++) order[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t j = (int64_t)uniform_below(&state, (uint64_t)i + 1);
        const int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    return BRG_OK;
}

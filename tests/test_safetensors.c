/* Safetensors files (brigade/safetensors.h):
 *   - what brigade writes reads back (names, order, shapes, bytes,
 *     metadata, a scalar, an empty tensor), and an independent minimal
 *     reader written here (header length, JSON header, offsets) finds a
 *     valid file with the same contents;
 *   - a file written by an independent minimal writer (other dtypes, keys
 *     in another order than the data) opens: F32 reads, F16 is refused by
 *     name;
 *   - every prefix of a valid file, random byte flips, and each kind of bad
 *     header: BRG_ERR_FORMAT naming the file (and the tensor), never a
 *     crash; the header alone (brg_safetensors_open_header) is refused
 *     exactly when the whole file is, and reads the same names and shapes;
 *   - writes are atomic: a missing folder fails with nothing left, an
 *     existing file is replaced, no temporary file stays. */
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brigade/safetensors.h"
#include "testutil.h"

static char folder[256];

static void path_in(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", folder, name); }

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

static void write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, size, f) == size);
    fclose(f);
}

/* ---- what brigade writes ---- */

static float w[2][3] = {{1.5f, -2.0f, 3.25f}, {0.0f, 1e-30f, -7.0f}};
static int32_t counts[4] = {1, -2, 3, 2147483647};
static float scalar = 42.0f;

static int sample(brg_safetensor *ts)
{
    memset(ts, 0, 4 * sizeof *ts);
    ts[0] = (brg_safetensor){.name = "layer.weight", .dtype = BRG_F32, .ndim = 2, .shape = {2, 3}, .data = w,
                             .bytes = sizeof w};
    ts[1] = (brg_safetensor){.name = "counts", .dtype = BRG_I32, .ndim = 1, .shape = {4}, .data = counts,
                             .bytes = sizeof counts};
    ts[2] = (brg_safetensor){.name = "step", .dtype = BRG_F32, .ndim = 0, .data = &scalar, .bytes = sizeof scalar};
    ts[3] = (brg_safetensor){.name = "empty", .dtype = BRG_F32, .ndim = 2, .shape = {0, 3}, .data = NULL, .bytes = 0};
    return 4;
}

/* The independent reader: the 8-byte length, the JSON header, and each
 * tensor's bytes by its offsets must equal want[]. */
static void independent_read(const char *path, const brg_safetensor *want, int n)
{
    size_t size = 0;
    unsigned char *b = read_file(path, &size);
    CHECK(b != NULL && size >= 8);
    if (!b || size < 8) {
        free(b);
        return;
    }
    uint64_t len = 0;
    for (int i = 7; i >= 0; i--) len = len << 8 | b[i]; /* little-endian, whatever the host */
    CHECK_MSG(len % 8 == 0 && 8 + len <= size, "header length %llu in %zu bytes", (unsigned long long)len, size);
    json_error_t jerr;
    json_t *h = json_loadb((const char *)b + 8, (size_t)len, 0, &jerr);
    CHECK_MSG(h && json_is_object(h), "header: %s", h ? "not an object" : jerr.text);
    uint64_t covered = 0;
    for (int i = 0; h && i < n; i++) {
        json_t *e = json_object_get(h, want[i].name);
        CHECK_MSG(e != NULL, "no entry '%s'", want[i].name);
        if (!e) continue;
        const char *dt = json_string_value(json_object_get(e, "dtype"));
        CHECK(dt && strcmp(dt, want[i].dtype == BRG_F32 ? "F32" : "I32") == 0);
        json_t *shape = json_object_get(e, "shape");
        CHECK((int)json_array_size(shape) == want[i].ndim);
        for (int d = 0; d < want[i].ndim; d++)
            CHECK(json_integer_value(json_array_get(shape, (size_t)d)) == want[i].shape[d]);
        json_t *off = json_object_get(e, "data_offsets");
        const uint64_t s = (uint64_t)json_integer_value(json_array_get(off, 0));
        const uint64_t t = (uint64_t)json_integer_value(json_array_get(off, 1));
        CHECK(t - s == want[i].bytes && 8 + len + t <= size);
        if (t - s == want[i].bytes && 8 + len + t <= size && want[i].bytes)
            CHECK(memcmp(b + 8 + len + s, want[i].data, want[i].bytes) == 0);
        covered += t - s;
    }
    CHECK_MSG(covered == size - 8 - len, "tensors cover %llu of %zu data bytes", (unsigned long long)covered,
              size - 8 - (size_t)len);
    json_t *meta = h ? json_object_get(h, "__metadata__") : NULL;
    CHECK(meta && strcmp(json_string_value(json_object_get(meta, "format")), "pt") == 0);
    json_decref(h);
    free(b);
}

static void test_round_trip(void)
{
    brg_safetensor ts[4];
    const int n = sample(ts);
    char path[300];
    path_in(path, sizeof path, "round.safetensors");
    const char *keys[2] = {"format", "brigade.model"}, *values[2] = {"pt", "fmnist-cnn"};
    CHECK_OK(brg_safetensors_write(path, ts, n, keys, values, 2));
    independent_read(path, ts, n);
    brg_safetensors *f = NULL;
    CHECK_OK(brg_safetensors_open(path, &f));
    if (!f) return;
    CHECK(brg_safetensors_count(f) == n);
    for (int i = 0; i < n && i < brg_safetensors_count(f); i++) {
        brg_safetensor t;
        CHECK_OK(brg_safetensors_get(f, i, &t));
        /* in the order of their data: the order written */
        CHECK(strcmp(t.name, ts[i].name) == 0 && t.dtype == ts[i].dtype && t.ndim == ts[i].ndim &&
              t.bytes == ts[i].bytes);
        for (int d = 0; d < t.ndim; d++) CHECK(t.shape[d] == ts[i].shape[d]);
        if (t.bytes) CHECK(memcmp(t.data, ts[i].data, t.bytes) == 0);
        CHECK(brg_safetensors_find(f, ts[i].name) == i);
    }
    CHECK(brg_safetensors_find(f, "nothing") == -1);
    CHECK(strcmp(brg_safetensors_dtype_name(f, 1), "I32") == 0);
    CHECK(strcmp(brg_safetensors_metadata(f, "brigade.model"), "fmnist-cnn") == 0);
    CHECK(brg_safetensors_metadata(f, "other") == NULL);
    CHECK(strcmp(brg_safetensors_path(f), path) == 0);
    brg_safetensors_close(f);
    /* the header alone: the same names, dtypes and shapes, no data */
    CHECK_OK(brg_safetensors_open_header(path, &f));
    CHECK(f && brg_safetensors_count(f) == n);
    for (int i = 0; f && i < n && i < brg_safetensors_count(f); i++) {
        brg_safetensor t;
        CHECK_OK(brg_safetensors_get(f, i, &t));
        CHECK(strcmp(t.name, ts[i].name) == 0 && t.dtype == ts[i].dtype && t.ndim == ts[i].ndim &&
              t.bytes == ts[i].bytes && t.data == NULL);
    }
    CHECK(f && strcmp(brg_safetensors_metadata(f, "brigade.model"), "fmnist-cnn") == 0);
    brg_safetensors_close(f);
    /* nothing to write is a valid file too */
    CHECK_OK(brg_safetensors_write(path, NULL, 0, NULL, NULL, 0));
    CHECK_OK(brg_safetensors_open(path, &f));
    CHECK(f && brg_safetensors_count(f) == 0);
    brg_safetensors_close(f);
}

static void test_bad_writes(void)
{
    brg_safetensor ts[4];
    const int n = sample(ts);
    char path[300];
    path_in(path, sizeof path, "bad-write.safetensors");
    ts[1].name = ts[0].name;
    CHECK_STATUS(brg_safetensors_write(path, ts, n, NULL, NULL, 0), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("two tensors are named 'layer.weight'");
    sample(ts);
    ts[0].bytes = 20;
    CHECK_STATUS(brg_safetensors_write(path, ts, n, NULL, NULL, 0), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("layer.weight");
    sample(ts);
    ts[2].name = "__metadata__";
    CHECK_STATUS(brg_safetensors_write(path, ts, n, NULL, NULL, 0), BRG_ERR_INVALID_ARGUMENT);
    struct stat sb;
    CHECK(stat(path, &sb) != 0); /* nothing was written */
}

/* ---- an independent writer ---- */

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void test_foreign_file(void)
{
    /* data: an F16 [2] (4 bytes), an I64 [1] (8), an F32 [2] (8); the keys
     * in another order than the data, no padding, no metadata */
    const char *header = "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]},"
                         "\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                         "\"c\":{\"shape\":[1],\"dtype\":\"I64\",\"data_offsets\":[4,12]}}";
    const size_t hl = strlen(header);
    unsigned char buf[512];
    put_le64(buf, hl);
    memcpy(buf + 8, header, hl);
    unsigned char *d = buf + 8 + hl;
    memset(d, 0x3c, 4);
    put_le64(d + 4, 7);
    const float b[2] = {0.5f, -1.0f};
    memcpy(d + 12, b, sizeof b);
    char path[300];
    path_in(path, sizeof path, "foreign.safetensors");
    write_file(path, buf, 8 + hl + 20);
    brg_safetensors *f = NULL;
    CHECK_OK(brg_safetensors_open(path, &f));
    if (!f) return;
    CHECK(brg_safetensors_count(f) == 3);
    const int ib = brg_safetensors_find(f, "b"), ia = brg_safetensors_find(f, "a");
    CHECK(ia == 0 && ib == 2); /* in data order */
    brg_safetensor t;
    CHECK_OK(brg_safetensors_get(f, ib, &t));
    CHECK(t.dtype == BRG_F32 && t.bytes == sizeof b && memcmp(t.data, b, sizeof b) == 0);
    CHECK_STATUS(brg_safetensors_get(f, ia, &t), BRG_ERR_UNSUPPORTED);
    CHECK_ERROR_HAS("'a' is F16");
    CHECK(strcmp(t.name, "a") == 0 && t.ndim == 1 && t.shape[0] == 2 && t.data == NULL);
    CHECK(strcmp(brg_safetensors_dtype_name(f, 1), "I64") == 0);
    brg_safetensors_close(f);
}

/* ---- bad files ---- */

/* A file of header text and data_bytes zero bytes of data must fail with
 * BRG_ERR_FORMAT naming the file and, when given, want. */
static void bad_header(const char *header, size_t data_bytes, const char *want)
{
    const size_t hl = strlen(header);
    unsigned char *buf = calloc(8 + hl + data_bytes + 1, 1);
    put_le64(buf, hl);
    memcpy(buf + 8, header, hl);
    char path[300];
    path_in(path, sizeof path, "bad.safetensors");
    write_file(path, buf, 8 + hl + data_bytes);
    free(buf);
    brg_safetensors *f = NULL;
    CHECK_STATUS(brg_safetensors_open(path, &f), BRG_ERR_FORMAT);
    CHECK(f == NULL);
    CHECK_ERROR_HAS(path);
    if (want) CHECK_ERROR_HAS(want);
    fprintf(stderr, "refused: %s\n", brg_last_error());
}

static void test_bad_files(void)
{
    const char *ok = "\"dtype\":\"F32\",\"shape\":[2]";
    char h[512];
    bad_header("not json", 0, "not JSON");
    bad_header("[1, 2]", 0, "not a JSON object");
    snprintf(h, sizeof h, "{\"t\":{%s,\"data_offsets\":[0,8]},\"t\":{%s,\"data_offsets\":[0,8]}}", ok, ok);
    bad_header(h, 8, "duplicate");
    bad_header("{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'t'");
    bad_header("{\"t\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype");
    bad_header("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "extent");
    bad_header("{\"t\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "extent");
    bad_header("{\"t\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8, "shape");
    bad_header("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "shape");
    snprintf(h, sizeof h, "{\"t\":{%s,\"data_offsets\":[8,0]}}", ok);
    bad_header(h, 8, "BEGIN <= END");
    snprintf(h, sizeof h, "{\"t\":{%s,\"data_offsets\":[0,16]}}", ok);
    bad_header(h, 8, "past the end");
    snprintf(h, sizeof h, "{\"t\":{%s,\"data_offsets\":[0,4]}}", ok);
    bad_header(h, 4, "span its shape");
    snprintf(h, sizeof h, "{\"t\":{%s,\"data_offsets\":[0,8]},\"u\":{%s,\"data_offsets\":[4,12]}}", ok, ok);
    bad_header(h, 12, "overlaps");
    snprintf(h, sizeof h, "{\"t\":{%s,\"data_offsets\":[4,12]}}", ok);
    bad_header(h, 12, "gap");
    snprintf(h, sizeof h, "{\"t\":{%s,\"data_offsets\":[0,8]}}", ok);
    bad_header(h, 12, "after the last tensor");
    snprintf(h, sizeof h, "{\"t\":{%s,\"data_offsets\":[0,8],\"extra\":1}}", ok);
    bad_header(h, 8, "exactly dtype, shape and data_offsets");
    snprintf(h, sizeof h, "{\"__metadata__\":{\"a\":1},\"t\":{%s,\"data_offsets\":[0,8]}}", ok);
    bad_header(h, 8, "not a string");
    snprintf(h, sizeof h, "{\"t\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}");
    bad_header(h, 8, "span its shape");
    /* a header length beyond the file, and a huge one */
    char path[300];
    path_in(path, sizeof path, "bad.safetensors");
    unsigned char buf[16];
    put_le64(buf, 1000);
    memcpy(buf + 8, "{}      ", 8);
    write_file(path, buf, 16);
    brg_safetensors *f = NULL;
    CHECK_STATUS(brg_safetensors_open(path, &f), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("truncated");
    put_le64(buf, UINT64_MAX);
    write_file(path, buf, 16);
    CHECK_STATUS(brg_safetensors_open(path, &f), BRG_ERR_FORMAT);
    write_file(path, buf, 0);
    CHECK_STATUS(brg_safetensors_open(path, &f), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("shorter than the 8 bytes");
    path_in(path, sizeof path, "no-such.safetensors");
    CHECK_STATUS(brg_safetensors_open(path, &f), BRG_ERR_IO);
    CHECK_ERROR_HAS("no-such.safetensors");
    CHECK_STATUS(brg_safetensors_open(folder, &f), BRG_ERR_IO); /* a folder */
}

/* Every prefix of a valid file fails cleanly; random byte flips never
 * crash (each either opens or fails with BRG_ERR_FORMAT). */
static void test_damage(void)
{
    brg_safetensor ts[4];
    const int n = sample(ts);
    char good[300], path[300];
    path_in(good, sizeof good, "good.safetensors");
    path_in(path, sizeof path, "damaged.safetensors");
    const char *keys[1] = {"k"}, *values[1] = {"v"};
    CHECK_OK(brg_safetensors_write(good, ts, n, keys, values, 1));
    size_t size = 0;
    unsigned char *b = read_file(good, &size);
    CHECK(b != NULL);
    if (!b) return;
    int prefixes = 0;
    for (size_t len = 0; len < size; len++) {
        write_file(path, b, len);
        brg_safetensors *f = NULL;
        const brg_status st = brg_safetensors_open(path, &f);
        CHECK_MSG(st == BRG_ERR_FORMAT && f == NULL, "a prefix of %zu of %zu bytes: %s", len, size,
                  brg_status_string(st));
        brg_safetensors_close(f);
        f = NULL;
        const brg_status head = brg_safetensors_open_header(path, &f);
        CHECK_MSG(head == BRG_ERR_FORMAT && f == NULL, "the header of a prefix of %zu of %zu bytes: %s", len, size,
                  brg_status_string(head));
        brg_safetensors_close(f);
        prefixes++;
    }
    uint32_t seed = 12345;
    int opened = 0, refused = 0;
    for (int k = 0; k < 2000; k++) {
        unsigned char *c = malloc(size);
        memcpy(c, b, size);
        for (int flips = 0; flips < 3; flips++) {
            seed = seed * 1664525u + 1013904223u;
            const size_t at = (seed >> 8) % size;
            seed = seed * 1664525u + 1013904223u;
            c[at] ^= (unsigned char)(1u << ((seed >> 16) % 8));
        }
        write_file(path, c, size);
        free(c);
        brg_safetensors *f = NULL;
        /* without a checksum, the whole file is refused for what its
         * header says, so its header alone is refused alike */
        const brg_status head = brg_safetensors_open_header(path, &f);
        brg_safetensors_close(f);
        f = NULL;
        const brg_status st = brg_safetensors_open(path, &f);
        CHECK_MSG(st == BRG_OK || st == BRG_ERR_FORMAT, "flipped bytes: %s", brg_status_string(st));
        CHECK_MSG(head == st, "flipped bytes: the header alone %s, the whole file %s", brg_status_string(head),
                  brg_status_string(st));
        if (st == BRG_OK) {
            opened++;
            for (int i = 0; i < brg_safetensors_count(f); i++) {
                brg_safetensor t;
                (void)brg_safetensors_get(f, i, &t);
            }
        } else {
            refused++;
        }
        brg_safetensors_close(f);
    }
    fprintf(stderr, "damage: %d prefixes refused; 2000 files with 3 flipped bits: %d opened, %d refused\n", prefixes,
            opened, refused);
    free(b);
}

/* ---- atomic writes ---- */

static int temporaries_in(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    const struct dirent *e;
    while (d && (e = readdir(d)) != NULL) n += strstr(e->d_name, ".tmp") != NULL;
    if (d) closedir(d);
    return n;
}

static void test_atomic(void)
{
    brg_safetensor ts[4];
    const int n = sample(ts);
    char path[300];
    path_in(path, sizeof path, "missing-folder/x.safetensors");
    CHECK_STATUS(brg_safetensors_write(path, ts, n, NULL, NULL, 0), BRG_ERR_IO);
    CHECK_ERROR_HAS("missing-folder");
    path_in(path, sizeof path, "replaced.safetensors");
    write_file(path, "old contents", 12);
    CHECK_OK(brg_safetensors_write(path, ts, 1, NULL, NULL, 0));
    brg_safetensors *f = NULL;
    CHECK_OK(brg_safetensors_open(path, &f));
    CHECK(f && brg_safetensors_count(f) == 1);
    brg_safetensors_close(f);
    CHECK(temporaries_in(folder) == 0);
}

int main(void)
{
    snprintf(folder, sizeof folder, "%s/brigade-test-safetensors-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    CHECK(mkdir(folder, 0777) == 0);
    test_round_trip();
    test_bad_writes();
    test_foreign_file();
    test_bad_files();
    test_damage();
    test_atomic();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", folder);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", folder);
    TEST_EXIT();
}

/* IDX / Fashion-MNIST reader: synthetic files written with zlib into a
 * temporary folder (good ones read back exactly, then every kind of damage
 * the reader must name), batching and shuffling, and, where Debian's
 * dataset-fashion-mnist is installed, the real data set. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"

#ifndef BRG_TEST_BUILDDIR
#define BRG_TEST_BUILDDIR "."
#endif
#ifndef BRG_FASHION_MNIST_DIR
#define BRG_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#endif

#define SIDE 28
#define PIXELS (SIDE * SIDE)

static char tmpdir[1024];

/* ---- fixtures ---------------------------------------------------------- */

typedef struct bytes {
    unsigned char *p;
    size_t n;
} bytes;

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Pixel k of image i: every byte value occurs in each 28x28 image. */
static unsigned char pixel(int64_t i, int64_t k) { return (unsigned char)((i * 37 + k * 11 + 3) % 256); }

/* An IDX image file: header (with the given magic and dims) and count*h*w
 * pattern pixels, of which only the first payload_bytes are kept (or all,
 * when payload_bytes is negative), followed by extra bytes of 0xAB. */
static bytes make_images(uint32_t magic, uint32_t count, uint32_t h, uint32_t w, long payload_bytes, size_t extra)
{
    size_t full = (size_t)count * h * w;
    size_t keep = payload_bytes < 0 ? full : (size_t)payload_bytes;
    bytes b = {malloc(16 + keep + extra), 16 + keep + extra};
    if (!b.p) {
        fprintf(stderr, "out of memory\n");
        exit(99);
    }
    put_be32(b.p, magic);
    put_be32(b.p + 4, count);
    put_be32(b.p + 8, h);
    put_be32(b.p + 12, w);
    const size_t item = (size_t)h * w;
    for (size_t k = 0; k < keep; k++) b.p[16 + k] = pixel((int64_t)(k / item), (int64_t)(k % item));
    memset(b.p + 16 + keep, 0xAB, extra);
    return b;
}

static bytes make_labels(uint32_t magic, uint32_t count, const unsigned char *values, size_t n)
{
    bytes b = {malloc(8 + n), 8 + n};
    if (!b.p) {
        fprintf(stderr, "out of memory\n");
        exit(99);
    }
    put_be32(b.p, magic);
    put_be32(b.p + 4, count);
    memcpy(b.p + 8, values, n);
    return b;
}

static void path_of(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", tmpdir, name); }

static void make_subdir(const char *name)
{
    char p[1200];
    path_of(p, sizeof p, name);
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", p, strerror(errno));
        exit(99);
    }
}

/* Write b to tmpdir/name, gzip compressed with zlib (gz) or plain; consumes b. */
static void write_file(const char *name, bytes b, int gz)
{
    char p[1200];
    path_of(p, sizeof p, name);
    int ok;
    if (gz) {
        gzFile f = gzopen(p, "wb9");
        ok = f && gzwrite(f, b.p, (unsigned)b.n) == (int)b.n;
        ok = f && gzclose(f) == Z_OK && ok;
    } else {
        FILE *f = fopen(p, "wb");
        ok = f && fwrite(b.p, 1, b.n, f) == b.n;
        ok = f && fclose(f) == 0 && ok;
    }
    free(b.p);
    if (!ok) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(99);
    }
}

/* The raw bytes of tmpdir/name (or of an absolute path). */
static bytes read_raw(const char *name)
{
    char p[1200];
    if (name[0] == '/') snprintf(p, sizeof p, "%s", name);
    else path_of(p, sizeof p, name);
    bytes b = {NULL, 0};
    FILE *f = fopen(p, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        fprintf(stderr, "cannot read %s\n", p);
        exit(99);
    }
    long n = ftell(f);
    rewind(f);
    b.p = malloc((size_t)n + 1);
    b.n = (size_t)n;
    if (!b.p || fread(b.p, 1, b.n, f) != b.n) {
        fprintf(stderr, "cannot read %s\n", p);
        exit(99);
    }
    fclose(f);
    return b;
}

static const unsigned char good_labels[5] = {3, 0, 9, 1, 7};

/* A valid cut-down Fashion-MNIST split in tmpdir/dir: 5 test samples, or
 * 7 train samples. */
static void write_split(const char *dir, const char *prefix, uint32_t count, int gz)
{
    static const unsigned char train_labels[7] = {9, 0, 0, 3, 0, 2, 7};
    char name[256];
    snprintf(name, sizeof name, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
    write_file(name, make_images(0x803, count, SIDE, SIDE, -1, 0), gz);
    snprintf(name, sizeof name, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
    write_file(name, make_labels(0x801, count, count == 5 ? good_labels : train_labels, count), gz);
}

static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char child[1200];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            remove_tree(child);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* ---- good files -------------------------------------------------------- */

static void check_fixture(const brg_dataset *ds, int64_t count, const unsigned char *labels)
{
    CHECK(ds != NULL);
    if (!ds) return;
    CHECK(ds->count == count);
    CHECK(ds->channels == 1 && ds->height == SIDE && ds->width == SIDE);
    CHECK(ds->classes == 10);
    CHECK(brg_dataset_sample_size(ds) == PIXELS);
    int64_t wrong = 0, ones = 0, zeros = 0;
    for (int64_t i = 0; i < ds->count && i < count; i++) {
        CHECK_MSG(ds->labels[i] == labels[i], "label %lld is %d, want %d", (long long)i, (int)ds->labels[i],
                  (int)labels[i]);
        for (int64_t k = 0; k < PIXELS; k++) {
            float v = ds->images[i * PIXELS + k];
            if (v != (float)pixel(i, k) / 255.0f) wrong++;
            if (pixel(i, k) == 255) ones += v == 1.0f;
            if (pixel(i, k) == 0) zeros += v == 0.0f;
        }
    }
    CHECK_MSG(wrong == 0, "%lld pixels differ from byte/255", (long long)wrong);
    /* Each image holds every byte value at least 3 times (784 = 3 * 256 + 16). */
    CHECK(ones >= 3 * count && zeros >= 3 * count);
}

static void test_good_files(void)
{
    brg_dataset *ds = NULL;
    make_subdir("good");
    write_split("good", "t10k", 5, 1);
    write_split("good", "train", 7, 1);
    char dir[1200];
    path_of(dir, sizeof dir, "good");

    CHECK_OK(brg_fashion_mnist_load(dir, BRG_SPLIT_TEST, &ds));
    check_fixture(ds, 5, good_labels);
    brg_dataset_destroy(ds);
    ds = NULL;

    static const unsigned char train_labels[7] = {9, 0, 0, 3, 0, 2, 7};
    char slash[1300];
    snprintf(slash, sizeof slash, "%s/", dir); /* a trailing slash is fine */
    CHECK_OK(brg_fashion_mnist_load(slash, BRG_SPLIT_TRAIN, &ds));
    check_fixture(ds, 7, train_labels);
    brg_dataset_destroy(ds);
    ds = NULL;

    /* Uncompressed files, found when the .gz names are absent. */
    make_subdir("plain");
    write_split("plain", "t10k", 5, 0);
    path_of(dir, sizeof dir, "plain");
    CHECK_OK(brg_fashion_mnist_load(dir, BRG_SPLIT_TEST, &ds));
    check_fixture(ds, 5, good_labels);
    brg_dataset_destroy(ds);
    ds = NULL;

    /* The default folder follows BRIGADE_DATA_DIR. */
    path_of(dir, sizeof dir, "good");
    setenv("BRIGADE_DATA_DIR", dir, 1);
    CHECK(strcmp(brg_fashion_mnist_default_dir(), dir) == 0);
    CHECK_OK(brg_fashion_mnist_load(NULL, BRG_SPLIT_TEST, &ds));
    check_fixture(ds, 5, good_labels);
    brg_dataset_destroy(ds);
    ds = NULL;
    setenv("BRIGADE_DATA_DIR", "", 1);
    CHECK(strcmp(brg_fashion_mnist_default_dir(), BRG_FASHION_MNIST_DIR) == 0);
    unsetenv("BRIGADE_DATA_DIR");
    CHECK(strcmp(brg_fashion_mnist_default_dir(), BRG_FASHION_MNIST_DIR) == 0);

    /* The low-level readers take any image size and any byte label. */
    int64_t count = -1;
    int h = -1, w = -1;
    float *images = NULL;
    int32_t *labels = NULL;
    write_file("small-images", make_images(0x803, 2, 3, 4, -1, 0), 0);
    char p[1200];
    path_of(p, sizeof p, "small-images");
    CHECK_OK(brg_idx_read_images(p, &count, &h, &w, &images));
    CHECK(count == 2 && h == 3 && w == 4 && images != NULL);
    for (int k = 0; images && k < 24; k++)
        CHECK_MSG(images[k] == (float)pixel(k / 12, k % 12) / 255.0f, "pixel %d is %g", k, (double)images[k]);
    free(images);

    static const unsigned char wide[4] = {0, 10, 200, 255};
    write_file("wide-labels.gz", make_labels(0x801, 4, wide, 4), 1);
    path_of(p, sizeof p, "wide-labels.gz");
    CHECK_OK(brg_idx_read_labels(p, &count, &labels));
    CHECK(count == 4 && labels && labels[0] == 0 && labels[1] == 10 && labels[2] == 200 && labels[3] == 255);
    free(labels);
}

/* ---- damaged files ----------------------------------------------------- */

/* brg_idx_read_images on tmpdir/name must fail with want, and name the file. */
static void expect_images_error(const char *name, brg_status want, const char *reason)
{
    char p[1200];
    path_of(p, sizeof p, name);
    int64_t count = -1;
    int h = -1, w = -1;
    float *images = (float *)p;
    brg_clear_error();
    CHECK_STATUS(brg_idx_read_images(p, &count, &h, &w, &images), want);
    CHECK(images == NULL && count == 0 && h == 0 && w == 0);
    CHECK_ERROR_HAS(p);
    if (reason) CHECK_ERROR_HAS(reason);
    fprintf(stderr, "note: %s\n", brg_last_error());
}

static void expect_labels_error(const char *name, brg_status want, const char *reason)
{
    char p[1200];
    path_of(p, sizeof p, name);
    int64_t count = -1;
    int32_t *labels = (int32_t *)p;
    brg_clear_error();
    CHECK_STATUS(brg_idx_read_labels(p, &count, &labels), want);
    CHECK(labels == NULL && count == 0);
    CHECK_ERROR_HAS(p);
    if (reason) CHECK_ERROR_HAS(reason);
    fprintf(stderr, "note: %s\n", brg_last_error());
}

/* brg_fashion_mnist_load on tmpdir/dir must fail with want; the message
 * must hold file (the base name of the file at fault) and reason. */
static void expect_load_error(const char *dir, brg_split split, brg_status want, const char *file,
                              const char *reason)
{
    char p[1200];
    path_of(p, sizeof p, dir);
    brg_dataset *ds = (brg_dataset *)p;
    brg_clear_error();
    CHECK_STATUS(brg_fashion_mnist_load(p, split, &ds), want);
    CHECK(ds == NULL);
    CHECK_ERROR_HAS(p);
    CHECK_ERROR_HAS(file);
    if (reason) CHECK_ERROR_HAS(reason);
    fprintf(stderr, "note: %s\n", brg_last_error());
}

static void test_truncated(void)
{
    /* A gzip file cut in the middle of its compressed stream. */
    write_file("full.gz", make_images(0x803, 5, SIDE, SIDE, -1, 0), 1);
    bytes b = read_raw("full.gz");
    bytes half = {malloc(b.n / 2), b.n / 2};
    memcpy(half.p, b.p, half.n);
    write_file("cut-middle.gz", half, 0);
    expect_images_error("cut-middle.gz", BRG_ERR_FORMAT, "truncated");
    CHECK_ERROR_HAS("ends after");
    CHECK_ERROR_HAS("of 3936 bytes");

    /* Cut inside the 8-byte gzip trailer: all pixels arrive, the check does not. */
    bytes tail = {malloc(b.n - 4), b.n - 4};
    memcpy(tail.p, b.p, tail.n);
    write_file("cut-trailer.gz", tail, 0);
    expect_images_error("cut-trailer.gz", BRG_ERR_FORMAT, "truncated");
    CHECK_ERROR_HAS("gzip stream is cut off");
    free(b.p);

    /* A valid gzip stream whose payload is short: 4.5 of 5 images. */
    write_file("short.gz", make_images(0x803, 5, SIDE, SIDE, 4 * PIXELS + PIXELS / 2, 0), 1);
    expect_images_error("short.gz", BRG_ERR_FORMAT, "ends after 3544 of 3936 bytes");
    write_file("short", make_images(0x803, 5, SIDE, SIDE, 4 * PIXELS + PIXELS / 2, 0), 0);
    expect_images_error("short", BRG_ERR_FORMAT, "ends after 3544 of 3936 bytes");

    /* Headers cut short, and an empty file. */
    bytes head = make_images(0x803, 5, SIDE, SIDE, 0, 0);
    head.n = 10;
    write_file("head-cut.gz", head, 1);
    expect_images_error("head-cut.gz", BRG_ERR_FORMAT, "ends after 10 of 16 bytes");
    write_file("empty.gz", (bytes){malloc(1), 0}, 1);
    expect_labels_error("empty.gz", BRG_ERR_FORMAT, "ends after 0 of 4 bytes");

    /* A header claiming 2^31-1 images over a few bytes: truncated, not a
     * huge allocation. */
    write_file("liar.gz", make_images(0x803, 0x7fffffffu, SIDE, SIDE, 3 * PIXELS, 0), 1);
    expect_images_error("liar.gz", BRG_ERR_FORMAT, "truncated");
    /* Sides of 2^32-1 each, whose product overflowed int64 in the size
     * check (found by tests/fuzz/fuzz_idx.c; the input is in its corpus). */
    write_file("huge-sides", make_images(0x803, 1023, 0xffffffffu, 0xffffffffu, 0, 0), 0);
    expect_images_error("huge-sides", BRG_ERR_FORMAT, "4294967295 rows x 4294967295 columns");
}

static void test_corrupt(void)
{
    write_file("crc.gz", make_images(0x803, 5, SIDE, SIDE, -1, 0), 1);
    bytes b = read_raw("crc.gz");
    b.p[b.n - 8] ^= 0x5a; /* the CRC-32 in the gzip trailer */
    write_file("crc.gz", b, 0);
    expect_images_error("crc.gz", BRG_ERR_FORMAT, "corrupt");
    CHECK_ERROR_HAS("incorrect data check");

    /* Bytes flipped inside the deflate data. Whatever zlib makes of them
     * (a bad code, a wrong check, a different length), it is a format error
     * that names the file. */
    write_file("flip.gz", make_images(0x803, 5, SIDE, SIDE, -1, 0), 1);
    b = read_raw("flip.gz");
    for (size_t k = b.n / 3; k < b.n / 3 + 6; k++) b.p[k] ^= 0xff;
    write_file("flip.gz", b, 0);
    expect_images_error("flip.gz", BRG_ERR_FORMAT, NULL);

    /* The same on the labels of a split, through the loader. */
    make_subdir("flip-labels");
    write_split("flip-labels", "t10k", 5, 1);
    b = read_raw("flip-labels/t10k-labels-idx1-ubyte.gz");
    b.p[b.n - 5] ^= 0x01; /* the length check in the trailer */
    write_file("flip-labels/t10k-labels-idx1-ubyte.gz", b, 0);
    expect_load_error("flip-labels", BRG_SPLIT_TEST, BRG_ERR_FORMAT, "t10k-labels-idx1-ubyte.gz", "corrupt");
}

static void test_bad_headers(void)
{
    /* Wrong magic numbers: a label file read as images and the reverse,
     * and something that is not IDX at all. */
    write_file("labels-as-images.gz", make_labels(0x801, 5, good_labels, 5), 1);
    expect_images_error("labels-as-images.gz", BRG_ERR_FORMAT, "0x00000801");
    CHECK_ERROR_HAS("expected 0x00000803");
    CHECK_ERROR_HAS("label file");
    write_file("images-as-labels.gz", make_images(0x803, 1, SIDE, SIDE, -1, 0), 1);
    expect_labels_error("images-as-labels.gz", BRG_ERR_FORMAT, "0x00000803");
    CHECK_ERROR_HAS("expected 0x00000801");
    write_file("junk.gz", make_images(0x12345678, 1, SIDE, SIDE, -1, 0), 1);
    expect_images_error("junk.gz", BRG_ERR_FORMAT, "0x12345678");
    CHECK_ERROR_HAS("not an IDX file");
    write_file("floats.gz", make_images(0x00000d03, 1, SIDE, SIDE, -1, 0), 1);
    expect_images_error("floats.gz", BRG_ERR_FORMAT, "not unsigned bytes");

    /* Impossible dimensions and counts. */
    write_file("zero-side.gz", make_images(0x803, 2, 0, SIDE, -1, 0), 1);
    expect_images_error("zero-side.gz", BRG_ERR_FORMAT, "0 rows x 28 columns");
    write_file("huge-side.gz", make_images(0x803, 1, 0x10000, 0x10000, 0, 0), 1);
    expect_images_error("huge-side.gz", BRG_ERR_FORMAT, "65536 rows x 65536 columns");
    write_file("zero-count.gz", make_images(0x803, 0, SIDE, SIDE, -1, 0), 1);
    expect_images_error("zero-count.gz", BRG_ERR_FORMAT, "declares 0 images");
    write_file("huge-count.gz", make_labels(0x801, 0xffffffffu, good_labels, 5), 1);
    expect_labels_error("huge-count.gz", BRG_ERR_FORMAT, "4294967295 labels");
    CHECK_ERROR_HAS("sane limit");

    /* Fashion-MNIST wants 28x28 images; the generic reader does not. */
    make_subdir("dims");
    write_split("dims", "t10k", 5, 1);
    write_file("dims/t10k-images-idx3-ubyte.gz", make_images(0x803, 5, 27, SIDE, -1, 0), 1);
    expect_load_error("dims", BRG_SPLIT_TEST, BRG_ERR_FORMAT, "t10k-images-idx3-ubyte.gz", "27x28");
    CHECK_ERROR_HAS("are 28x28");
}

static void test_bad_contents(void)
{
    /* Bytes after the declared payload, gzip and plain. */
    write_file("trailing.gz", make_images(0x803, 2, SIDE, SIDE, -1, 3), 1);
    expect_images_error("trailing.gz", BRG_ERR_FORMAT, "3 bytes of trailing data after the 1584 bytes");
    write_file("trailing", make_labels(0x801, 4, good_labels, 5), 0);
    expect_labels_error("trailing", BRG_ERR_FORMAT, "1 byte of trailing data");

    /* A second gzip member after a complete file. */
    write_file("two-members.gz", make_labels(0x801, 5, good_labels, 5), 1);
    bytes one = read_raw("two-members.gz");
    bytes twice = {malloc(2 * one.n), 2 * one.n};
    memcpy(twice.p, one.p, one.n);
    memcpy(twice.p + one.n, one.p, one.n);
    free(one.p);
    write_file("two-members.gz", twice, 0);
    expect_labels_error("two-members.gz", BRG_ERR_FORMAT, "13 bytes of trailing data");

    /* Image and label counts disagree. */
    make_subdir("mismatch");
    write_split("mismatch", "train", 7, 1);
    write_file("mismatch/train-labels-idx1-ubyte.gz", make_labels(0x801, 4, good_labels, 4), 1);
    expect_load_error("mismatch", BRG_SPLIT_TRAIN, BRG_ERR_FORMAT, "train-images-idx3-ubyte.gz", "7 images");
    CHECK_ERROR_HAS("train-labels-idx1-ubyte.gz holds 4 labels");

    /* A label outside 0..9. */
    static const unsigned char bad[5] = {3, 0, 10, 1, 12};
    make_subdir("label-range");
    write_split("label-range", "t10k", 5, 1);
    write_file("label-range/t10k-labels-idx1-ubyte.gz", make_labels(0x801, 5, bad, 5), 1);
    expect_load_error("label-range", BRG_SPLIT_TEST, BRG_ERR_FORMAT, "t10k-labels-idx1-ubyte.gz",
                      "label 10 of sample 2 is outside 0..9");
    CHECK_ERROR_HAS("2 bad labels");
}

static void test_missing(void)
{
    /* No folder at all: the labels are looked for first. */
    expect_load_error("no-such-dir", BRG_SPLIT_TEST, BRG_ERR_IO, "t10k-labels-idx1-ubyte.gz",
                      "apt-get install dataset-fashion-mnist");
    CHECK_ERROR_HAS("--data-dir");
    CHECK_ERROR_HAS("BRIGADE_DATA_DIR");

    /* Labels there, images not. */
    make_subdir("no-images");
    write_file("no-images/t10k-labels-idx1-ubyte.gz", make_labels(0x801, 5, good_labels, 5), 1);
    expect_load_error("no-images", BRG_SPLIT_TEST, BRG_ERR_IO, "t10k-images-idx3-ubyte.gz", "cannot open");

    /* The low-level readers name the file and give no install hint. */
    expect_images_error("missing.gz", BRG_ERR_IO, "cannot open");
    CHECK(strstr(brg_last_error(), "apt-get") == NULL);

    /* A folder where a file should be: it opens, but cannot be read. */
    make_subdir("a-folder");
    expect_labels_error("a-folder", BRG_ERR_IO, "cannot read");
}

static void test_arguments(void)
{
    char dir[1200];
    path_of(dir, sizeof dir, "good");
    brg_dataset *ds = NULL;
    CHECK_STATUS(brg_fashion_mnist_load(dir, BRG_SPLIT_TEST, NULL), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_fashion_mnist_load(dir, (brg_split)7, &ds), BRG_ERR_INVALID_ARGUMENT);
    CHECK(ds == NULL);
    int64_t count;
    int h, w;
    float *images;
    CHECK_STATUS(brg_idx_read_images(NULL, &count, &h, &w, &images), BRG_ERR_INVALID_ARGUMENT);
    CHECK(images == NULL && count == 0);
    CHECK_STATUS(brg_idx_read_labels(dir, &count, NULL), BRG_ERR_INVALID_ARGUMENT);
    brg_dataset_destroy(NULL);
}

/* ---- batches and shuffling --------------------------------------------- */

static void test_batches(void)
{
    char dir[1200];
    path_of(dir, sizeof dir, "good");
    brg_dataset *ds = NULL;
    CHECK_OK(brg_fashion_mnist_load(dir, BRG_SPLIT_TEST, &ds));
    if (!ds) return;

    float *img = malloc(3 * PIXELS * sizeof(float));
    int32_t lab[3] = {-1, -1, -1};
    CHECK_OK(brg_dataset_batch(ds, 1, 3, img, lab));
    CHECK(lab[0] == 0 && lab[1] == 9 && lab[2] == 1);
    CHECK(memcmp(img, ds->images + PIXELS, 3 * PIXELS * sizeof(float)) == 0);
    CHECK_OK(brg_dataset_batch(ds, 5, 0, img, lab));
    CHECK_OK(brg_dataset_batch(ds, 0, 2, NULL, lab));
    CHECK(lab[0] == 3 && lab[1] == 0);
    lab[0] = -1;
    CHECK_STATUS(brg_dataset_batch(ds, 4, 2, img, lab), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_dataset_batch(ds, -1, 1, img, lab), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_dataset_batch(ds, 0, -1, img, lab), BRG_ERR_INVALID_ARGUMENT);
    CHECK(lab[0] == -1);

    const int64_t idx[3] = {4, 0, 4};
    CHECK_OK(brg_dataset_gather(ds, idx, 3, img, lab));
    CHECK(lab[0] == 7 && lab[1] == 3 && lab[2] == 7);
    CHECK(memcmp(img, ds->images + 4 * PIXELS, PIXELS * sizeof(float)) == 0);
    CHECK(memcmp(img + PIXELS, ds->images, PIXELS * sizeof(float)) == 0);
    CHECK(memcmp(img + 2 * PIXELS, ds->images + 4 * PIXELS, PIXELS * sizeof(float)) == 0);
    const int64_t bad_idx[2] = {1, 5};
    lab[0] = -1;
    CHECK_STATUS(brg_dataset_gather(ds, bad_idx, 2, img, lab), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("index[1] = 5");
    CHECK(lab[0] == -1); /* nothing written */
    CHECK_STATUS(brg_dataset_gather(ds, NULL, 1, img, lab), BRG_ERR_INVALID_ARGUMENT);
    free(img);
    brg_dataset_destroy(ds);

    enum { N = 1000 };
    static int64_t a[N], b[N], c[N];
    static int seen[N];
    CHECK_OK(brg_shuffle_indices(a, N, 42));
    CHECK_OK(brg_shuffle_indices(b, N, 42));
    CHECK_OK(brg_shuffle_indices(c, N, 43));
    int bad = 0, fixed = 0;
    for (int i = 0; i < N; i++) {
        if (a[i] < 0 || a[i] >= N || seen[a[i]]++) bad++;
        fixed += a[i] == i;
    }
    CHECK_MSG(bad == 0, "%d entries are not a permutation", bad);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    CHECK_MSG(fixed < 10, "%d fixed points in a shuffle of %d", fixed, N); /* about 1 expected */
    /* The sequence is part of the contract: same seed, same order everywhere. */
    int64_t small[5];
    CHECK_OK(brg_shuffle_indices(small, 5, 1));
    fprintf(stderr, "note: shuffle(5, seed 1) = %lld %lld %lld %lld %lld\n", (long long)small[0],
            (long long)small[1], (long long)small[2], (long long)small[3], (long long)small[4]);
    CHECK_OK(brg_shuffle_indices(NULL, 0, 1));
    CHECK_STATUS(brg_shuffle_indices(small, -1, 1), BRG_ERR_INVALID_ARGUMENT);
}

/* ---- the real data set ------------------------------------------------- */

static void check_real_split(brg_split split, int64_t want_count, const int32_t *first_labels, double mean_lo,
                             double mean_hi)
{
    brg_dataset *ds = NULL;
    CHECK_OK(brg_fashion_mnist_load(BRG_FASHION_MNIST_DIR, split, &ds));
    if (!ds) return;
    CHECK(ds->count == want_count);
    CHECK(ds->channels == 1 && ds->height == 28 && ds->width == 28 && ds->classes == 10);
    int64_t hist[10] = {0};
    int64_t out_of_range = 0;
    for (int64_t i = 0; i < ds->count; i++) {
        if (ds->labels[i] < 0 || ds->labels[i] > 9) out_of_range++;
        else hist[ds->labels[i]]++;
    }
    CHECK(out_of_range == 0);
    for (int c = 0; c < 10; c++)
        CHECK_MSG(hist[c] == want_count / 10, "class %d has %lld samples, want %lld", c, (long long)hist[c],
                  (long long)want_count / 10);
    for (int i = 0; i < 10; i++) CHECK(ds->labels[i] == first_labels[i]);
    const int64_t n = ds->count * 784;
    float lo = 1.0f, hi = 0.0f;
    double sum = 0;
    for (int64_t k = 0; k < n; k++) {
        float v = ds->images[k];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
    }
    CHECK(lo == 0.0f && hi == 1.0f);
    CHECK_MSG(sum / (double)n > mean_lo && sum / (double)n < mean_hi, "mean pixel %.5f", sum / (double)n);
    brg_dataset_destroy(ds);
}

static void test_real_data(void)
{
    if (access(BRG_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0 ||
        access(BRG_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK) != 0) {
        fprintf(stderr,
                "note: no Fashion-MNIST in %s (apt-get install dataset-fashion-mnist); skipping the real-data "
                "checks\n",
                BRG_FASHION_MNIST_DIR);
        return;
    }
    static const int32_t train_first[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
    static const int32_t test_first[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    /* Published means: 0.2860 (train), 0.2868 (test). */
    check_real_split(BRG_SPLIT_TRAIN, 60000, train_first, 0.2855, 0.2865);
    check_real_split(BRG_SPLIT_TEST, 10000, test_first, 0.2863, 0.2873);

    /* Real deflate data with bytes flipped in the middle. */
    bytes b = read_raw(BRG_FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz");
    for (size_t k = b.n / 2; k < b.n / 2 + 4; k++) b.p[k] ^= 0xff;
    write_file("real-flipped.gz", b, 0);
    expect_labels_error("real-flipped.gz", BRG_ERR_FORMAT, NULL);
}

int main(void)
{
    char base[1000];
    snprintf(base, sizeof base, "%s/tmp", BRG_TEST_BUILDDIR);
    if (mkdir(base, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", base, strerror(errno));
        return 99;
    }
    snprintf(tmpdir, sizeof tmpdir, "%s/data-XXXXXX", base);
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "cannot create a folder under %s: %s\n", base, strerror(errno));
        return 99;
    }
    unsetenv("BRIGADE_DATA_DIR");

    test_good_files();
    test_truncated();
    test_corrupt();
    test_bad_headers();
    test_bad_contents();
    test_missing();
    test_arguments();
    test_batches();
    test_real_data();

    remove_tree(tmpdir);
    rmdir(base); /* only if nothing else uses it */
    TEST_EXIT();
}

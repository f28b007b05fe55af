/* Images: decoding every colour type the issue names, bad files, large
 * PNGs reduced while they stream (pixels and peak memory), the
 * transform against a plain full-image reference, class folders, the split,
 * a folder as a source (bad files skipped with the right labels), and the
 * loader (same batches with any thread count, errors at the right batch).
 * The test makes its images with the same libraries (spng, TurboJPEG). */
#include <pthread.h>
#include <spng.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "testutil.h"

static char tmp[256];

static void path_in(char *buf, size_t size, const char *rel) { snprintf(buf, size, "%s/%s", tmp, rel); }

static void write_bytes(const char *rel, const void *data, size_t len)
{
    char p[512];
    path_in(p, sizeof p, rel);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, len, f) == len);
    fclose(f);
}

static void *read_bytes(const char *rel, size_t *len)
{
    char p[512];
    path_in(p, sizeof p, rel);
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *d = malloc(*len ? *len : 1);
    if (fread(d, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return d;
}

static void mkdir_in(const char *rel)
{
    char p[512];
    path_in(p, sizeof p, rel);
    mkdir(p, 0755);
}

/* A w x h RGB gradient with a pattern, as bytes. */
static uint8_t *pattern(int w, int h, int c, int salt)
{
    uint8_t *p = malloc((size_t)w * h * c);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++)
                p[((size_t)y * w + x) * c + k] = (uint8_t)((x * 7 + y * 13 + k * 50 + salt) & 255);
    return p;
}

/* A PNG through spng with any colour type and bit depth (palette and
 * 16-bit ones are not what brg_image_write_png writes). */
static void write_png_raw(const char *rel, const void *pixels, size_t len, int w, int h, int color_type, int depth,
                          const struct spng_plte *plte, int interlace)
{
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    struct spng_ihdr ihdr = {(uint32_t)w, (uint32_t)h, (uint8_t)depth, (uint8_t)color_type, 0, 0, (uint8_t)interlace};
    spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
    spng_set_ihdr(ctx, &ihdr);
    if (plte) spng_set_plte(ctx, (struct spng_plte *)plte);
    int err = spng_encode_image(ctx, pixels, len, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
    CHECK_MSG(err == 0, "spng: %s", spng_strerror(err));
    size_t n = 0;
    void *png = spng_get_png_buffer(ctx, &n, &err);
    write_bytes(rel, png, n);
    free(png);
    spng_ctx_free(ctx);
}

static void test_png(void)
{
    char p[512];
    brg_image img;
    /* RGB: exact round trip; grey from it is the luma. */
    uint8_t *rgb = pattern(5, 4, 3, 0);
    path_in(p, sizeof p, "rgb.png");
    CHECK_OK(brg_image_write_png(p, rgb, 5, 4, 3));
    CHECK_OK(brg_image_read(p, 3, 0, &img));
    CHECK(img.width == 5 && img.height == 4 && img.channels == 3 && memcmp(img.pixels, rgb, 60) == 0);
    brg_image_free(&img);
    CHECK_OK(brg_image_read(p, 1, 0, &img));
    CHECK(img.channels == 1);
    const unsigned want = (19595u * rgb[3] + 38470u * rgb[4] + 7471u * rgb[5] + 32768u) >> 16;
    CHECK(img.pixels[1] == want);
    brg_image_free(&img);
    /* Grey: a grey image read as 1 channel is itself, as 3 channels it is replicated. */
    uint8_t *grey = pattern(6, 3, 1, 9);
    path_in(p, sizeof p, "grey.png");
    CHECK_OK(brg_image_write_png(p, grey, 6, 3, 1));
    CHECK_OK(brg_image_read(p, 1, 0, &img));
    CHECK(memcmp(img.pixels, grey, 18) == 0);
    brg_image_free(&img);
    CHECK_OK(brg_image_read(p, 3, 0, &img));
    CHECK(img.pixels[3 * 7] == grey[7] && img.pixels[3 * 7 + 1] == grey[7] && img.pixels[3 * 7 + 2] == grey[7]);
    brg_image_free(&img);
    /* RGBA: alpha dropped. */
    uint8_t *rgba = pattern(3, 3, 4, 5);
    path_in(p, sizeof p, "rgba.png");
    CHECK_OK(brg_image_write_png(p, rgba, 3, 3, 4));
    CHECK_OK(brg_image_read(p, 3, 0, &img));
    CHECK(img.pixels[3 * 4 + 2] == rgba[4 * 4 + 2] && img.pixels[0] == rgba[0]);
    brg_image_free(&img);
    /* Palette. */
    struct spng_plte plte = {0};
    plte.n_entries = 3;
    plte.entries[1].red = 10, plte.entries[1].green = 20, plte.entries[1].blue = 30;
    plte.entries[2].red = 200, plte.entries[2].green = 100, plte.entries[2].blue = 50;
    uint8_t idx[4] = {0, 1, 2, 1};
    write_png_raw("palette.png", idx, 4, 2, 2, SPNG_COLOR_TYPE_INDEXED, 8, &plte, 0);
    path_in(p, sizeof p, "palette.png");
    CHECK_OK(brg_image_read(p, 3, 0, &img));
    CHECK(img.width == 2 && img.pixels[3] == 10 && img.pixels[4] == 20 && img.pixels[6] == 200 && img.pixels[8] == 50);
    brg_image_free(&img);
    /* 16-bit grey: the high byte. */
    uint16_t deep[2] = {0x1234, 0xff00}; /* spng's SPNG_FMT_PNG takes 16-bit samples in host order */
    write_png_raw("deep.png", deep, 4, 2, 1, SPNG_COLOR_TYPE_GRAYSCALE, 16, NULL, 0);
    path_in(p, sizeof p, "deep.png");
    CHECK_OK(brg_image_read(p, 1, 0, &img));
    CHECK_MSG(img.pixels && img.pixels[0] == 0x12 && img.pixels[1] == 0xff, "%d %d", img.pixels ? img.pixels[0] : -1,
              img.pixels ? img.pixels[1] : -1);
    brg_image_free(&img);
    /* Corrupt (a flipped byte in the image data fails its CRC) and truncated. */
    size_t len = 0;
    uint8_t *bytes = read_bytes("rgb.png", &len);
    bytes[len - 20] ^= 0x55;
    write_bytes("corrupt.png", bytes, len);
    path_in(p, sizeof p, "corrupt.png");
    CHECK_STATUS(brg_image_read(p, 3, 0, &img), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("corrupt.png");
    CHECK(img.pixels == NULL);
    bytes[len - 20] ^= 0x55;
    write_bytes("short.png", bytes, len / 2);
    path_in(p, sizeof p, "short.png");
    CHECK_STATUS(brg_image_read(p, 3, 0, &img), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("short.png");
    free(bytes);
    free(rgb);
    free(grey);
    free(rgba);
}

/* A smooth w x h image (JPEG's kind of picture). */
static uint8_t *smooth(int w, int h, int c)
{
    uint8_t *p = malloc((size_t)w * h * c);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) p[((size_t)y * w + x) * c + k] = (uint8_t)(40 + x * 2 + y + 30 * k);
    return p;
}

static void test_jpeg(void)
{
    char p[512];
    brg_image img;
    const int w = 64, h = 48;
    uint8_t *rgb = smooth(w, h, 3);
    path_in(p, sizeof p, "photo.jpg");
    CHECK_OK(brg_image_write_jpeg(p, rgb, w, h, 3, 95));
    CHECK_OK(brg_image_read(p, 3, 0, &img));
    CHECK(img.width == w && img.height == h && img.channels == 3);
    /* Lossy, but close: mean absolute error of a smooth pattern at 95. */
    double err = 0;
    for (int i = 0; i < w * h * 3; i++) err += abs((int)img.pixels[i] - (int)rgb[i]);
    CHECK_MSG(err / (w * h * 3) < 2.0, "mean error %g", err / (w * h * 3));
    brg_image_free(&img);
    /* Scaled decoding: the smallest scale keeping the shorter side >= 24 is 1/2. */
    CHECK_OK(brg_image_read(p, 3, 24, &img));
    CHECK_MSG(img.width == 32 && img.height == 24, "%dx%d", img.width, img.height);
    brg_image_free(&img);
    CHECK_OK(brg_image_read(p, 3, 25, &img));
    CHECK_MSG(img.width == 40 && img.height == 30, "%dx%d", img.width, img.height); /* 5/8 */
    brg_image_free(&img);
    /* Grey JPEG read as RGB and as grey. */
    uint8_t *grey = smooth(16, 16, 1);
    path_in(p, sizeof p, "grey.jpg");
    CHECK_OK(brg_image_write_jpeg(p, grey, 16, 16, 1, 100));
    CHECK_OK(brg_image_read(p, 1, 0, &img));
    CHECK(img.channels == 1 && abs((int)img.pixels[17] - (int)grey[17]) <= 3);
    brg_image_free(&img);
    CHECK_OK(brg_image_read(p, 3, 0, &img));
    CHECK(img.channels == 3 && img.pixels[0] == img.pixels[1] && img.pixels[1] == img.pixels[2]);
    brg_image_free(&img);
    /* CMYK (TurboJPEG writes it as YCCK): uniform C'=200, K'=128 in the
     * inverted convention gives R = 200 * 128 / 255 = 100. */
    uint8_t cmyk[8 * 8 * 4];
    for (int i = 0; i < 64; i++) cmyk[4 * i] = 200, cmyk[4 * i + 1] = 255, cmyk[4 * i + 2] = 0, cmyk[4 * i + 3] = 128;
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long jlen = 0;
    CHECK(tjCompress2(tj, cmyk, 8, 0, 8, TJPF_CMYK, &jpeg, &jlen, TJSAMP_444, 100, 0) == 0);
    write_bytes("cmyk.jpg", jpeg, jlen);
    tjFree(jpeg);
    tjDestroy(tj);
    path_in(p, sizeof p, "cmyk.jpg");
    CHECK_OK(brg_image_read(p, 3, 0, &img));
    CHECK_MSG(img.pixels && abs(img.pixels[0] - 100) <= 2 && abs(img.pixels[1] - 128) <= 2 && img.pixels[2] <= 2,
              "%d %d %d", img.pixels ? img.pixels[0] : -1, img.pixels ? img.pixels[1] : -1,
              img.pixels ? img.pixels[2] : -1);
    brg_image_free(&img);
    /* Truncated: libjpeg's "premature end" warning is an error here. */
    size_t len = 0;
    uint8_t *bytes = read_bytes("photo.jpg", &len);
    write_bytes("truncated.jpg", bytes, len * 2 / 3);
    path_in(p, sizeof p, "truncated.jpg");
    CHECK_STATUS(brg_image_read(p, 3, 0, &img), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("truncated.jpg");
    CHECK(img.pixels == NULL);
    /* Padding between the last scan and the end marker: libjpeg warns of
     * "extraneous bytes", but the image is whole and reads as the file
     * without them (as PIL reads it). */
    CHECK(len > 2 && bytes[len - 2] == 0xff && bytes[len - 1] == 0xd9);
    uint8_t *padded = malloc(len + 16);
    if (padded) {
        memcpy(padded, bytes, len - 2);
        memset(padded + len - 2, 0x00, 16);
        memcpy(padded + len + 14, bytes + len - 2, 2);
        write_bytes("padded.jpg", padded, len + 16);
        free(padded);
        brg_image whole, pad;
        path_in(p, sizeof p, "photo.jpg");
        CHECK_OK(brg_image_read(p, 3, 0, &whole));
        path_in(p, sizeof p, "padded.jpg");
        CHECK_OK(brg_image_read(p, 3, 0, &pad));
        CHECK(whole.pixels && pad.pixels && whole.width == pad.width && whole.height == pad.height &&
              memcmp(whole.pixels, pad.pixels, (size_t)whole.width * whole.height * 3) == 0);
        brg_image_free(&whole);
        brg_image_free(&pad);
    }
    /* A header alone. */
    write_bytes("header.jpg", bytes, 20);
    path_in(p, sizeof p, "header.jpg");
    CHECK_STATUS(brg_image_read(p, 3, 0, &img), BRG_ERR_FORMAT);
    free(bytes);
    /* Empty, not an image, unreadable. */
    write_bytes("empty.jpg", "", 0);
    path_in(p, sizeof p, "empty.jpg");
    CHECK_STATUS(brg_image_read(p, 3, 0, &img), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("empty");
    write_bytes("text.png", "hello, world\n", 13);
    path_in(p, sizeof p, "text.png");
    CHECK_STATUS(brg_image_read(p, 3, 0, &img), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("neither a JPEG nor a PNG");
    CHECK_ERROR_HAS("it starts with 68 65 6c 6c)");
    write_bytes("two.png", "hi", 2);
    path_in(p, sizeof p, "two.png");
    CHECK_STATUS(brg_image_read(p, 3, 0, &img), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("it starts with 68 69, all of its bytes)");
    path_in(p, sizeof p, "missing.png");
    CHECK_STATUS(brg_image_read(p, 3, 0, &img), BRG_ERR_IO);
    CHECK_ERROR_HAS("cannot open image");
    CHECK_ERROR_HAS("missing.png");
    /* Refused before a byte is read, by kind (brg_open_regular). */
    mkdir_in("folder.png");
    path_in(p, sizeof p, "folder.png");
    CHECK_STATUS(brg_image_read(p, 3, 0, &img), BRG_ERR_IO);
    CHECK_ERROR_HAS("folder.png: it is a folder, not a file");
    CHECK_STATUS(brg_mask_read(p, &img), BRG_ERR_IO);
    CHECK_ERROR_HAS("folder.png: it is a folder, not a file");
    CHECK_STATUS(brg_image_decode("\xff\xd8\xff", 3, 2, 0, "x", &img), BRG_ERR_INVALID_ARGUMENT);
    free(rgb);
    free(grey);
}

/* The reference: resize the whole image (double precision, the same
 * triangle filter), then cut the window, flip, normalize. */
static double tri(double x) { x = fabs(x); return x < 1.0 ? 1.0 - x : 0.0; }

static void reference(const brg_image *img, int rw, int rh, int x0, int y0, int flip, const brg_image_transform *t,
                      float *out)
{
    const int C = img->channels;
    const double sx = (double)img->width / rw, sy = (double)img->height / rh;
    const double fx = sx > 1 ? sx : 1, fy = sy > 1 ? sy : 1;
    for (int y = 0; y < t->height; y++)
        for (int x = 0; x < t->width; x++)
            for (int c = 0; c < C; c++) {
                const double cx = (x0 + x + 0.5) * sx, cy = (y0 + y + 0.5) * sy;
                double num = 0, wsx = 0, wsy = 0;
                for (int i = 0; i < img->width; i++) wsx += tri((i + 0.5 - cx) / fx);
                for (int j = 0; j < img->height; j++) wsy += tri((j + 0.5 - cy) / fy);
                for (int j = 0; j < img->height; j++) {
                    const double wy = tri((j + 0.5 - cy) / fy);
                    if (wy == 0) continue;
                    for (int i = 0; i < img->width; i++) {
                        const double wx = tri((i + 0.5 - cx) / fx);
                        num += wx * wy * img->pixels[((size_t)j * img->width + i) * C + c];
                    }
                }
                const double v = num / (wsx * wsy);
                const int ox = flip ? t->width - 1 - x : x;
                out[(size_t)c * t->height * t->width + (size_t)y * t->width + ox] =
                    (float)((v / 255.0 - t->mean[c]) / t->std[c]);
            }
}

static void test_transform(void)
{
    brg_image img = {37, 29, 3, pattern(37, 29, 3, 1)};
    brg_image_transform t = brg_image_transform_init(3, 16, 16);
    CHECK(t.resize == 18); /* round(16 / 0.875) */
    CHECK_NEAR(t.mean[0], 0.485, 1e-7);
    float *out = malloc(3 * 16 * 16 * sizeof *out), *ref = malloc(3 * 16 * 16 * sizeof *ref);
    /* Centre crop: resized to 22x18 (the shorter side 29 -> 18, 37 * 18 / 29 = 22.96, truncated). */
    CHECK_OK(brg_image_transform_apply(&img, &t, 0, out));
    reference(&img, 22, 18, 3, 1, 0, &t, ref);
    double worst = 0;
    for (int i = 0; i < 3 * 256; i++) worst = fmax(worst, fabs(out[i] - ref[i]));
    CHECK_MSG(worst < 1e-4, "centre crop differs from the reference by %g", worst);
    /* Random crops and flips: each seed against the reference at its own window. */
    t.random = 1;
    t.flip = 1;
    int flips = 0, distinct = 0, last_x = -1;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        CHECK_OK(brg_image_transform_apply(&img, &t, seed, out));
        /* Find the window and flip the reference agrees with. */
        double best = 1e9;
        int bx = 0, bf = 0;
        for (int f = 0; f < 2; f++)
            for (int y0 = 0; y0 <= 2; y0++)
                for (int x0 = 0; x0 <= 6; x0++) {
                    reference(&img, 22, 18, x0, y0, f, &t, ref);
                    double e = 0;
                    for (int i = 0; i < 3 * 256; i++) e = fmax(e, fabs(out[i] - ref[i]));
                    if (e < best) best = e, bx = x0, bf = f;
                }
        CHECK_MSG(best < 1e-4, "seed %llu: no window matches (best %g)", (unsigned long long)seed, best);
        flips += bf;
        distinct += bx != last_x;
        last_x = bx;
        /* The same seed gives the same pixels. */
        float *again = malloc(3 * 256 * sizeof *again);
        CHECK_OK(brg_image_transform_apply(&img, &t, seed, again));
        CHECK(memcmp(again, out, 3 * 256 * sizeof *out) == 0);
        free(again);
    }
    CHECK_MSG(flips > 0 && flips < 12, "%d of 12 flipped", flips);
    CHECK_MSG(distinct > 3, "only %d window changes in 12 seeds", distinct);
    /* Upscaling (a 10x12 image to a shorter side of 18). */
    brg_image small = {10, 12, 3, pattern(10, 12, 3, 2)};
    t.random = 0;
    CHECK_OK(brg_image_transform_apply(&small, &t, 0, out));
    reference(&small, 18, 21, 1, 2, 0, &t, ref);
    worst = 0;
    for (int i = 0; i < 3 * 256; i++) worst = fmax(worst, fabs(out[i] - ref[i]));
    CHECK_MSG(worst < 1e-4, "upscaling differs by %g", worst);
    /* No resize, mean 0, std 1: exactly byte / 255, as the IDX reader. */
    brg_image g = {16, 16, 1, pattern(16, 16, 1, 4)};
    brg_image_transform id = brg_image_transform_init(1, 16, 16);
    id.resize = 0;
    CHECK_OK(brg_image_transform_apply(&g, &id, 0, out));
    int exact = 1;
    for (int i = 0; i < 256; i++) exact &= out[i] == (float)g.pixels[i] / 255.0f;
    CHECK(exact);
    /* A resize equal to the shorter side is the identity too. */
    id.resize = 16;
    CHECK_OK(brg_image_transform_apply(&g, &id, 0, out));
    exact = 1;
    for (int i = 0; i < 256; i++) exact &= out[i] == (float)g.pixels[i] / 255.0f;
    CHECK(exact);
    /* Too small for the crop, wrong channels, bad std. */
    id.resize = 0;
    brg_image tiny = {8, 8, 1, g.pixels};
    CHECK_STATUS(brg_image_transform_apply(&tiny, &id, 0, out), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("smaller than the 16x16 crop");
    CHECK_STATUS(brg_image_transform_apply(&img, &id, 0, out), BRG_ERR_INVALID_ARGUMENT);
    id.std[0] = 0;
    CHECK_STATUS(brg_image_transform_apply(&g, &id, 0, out), BRG_ERR_INVALID_ARGUMENT);
    free(img.pixels);
    free(small.pixels);
    free(g.pixels);
    free(out);
    free(ref);
}

/* A folder tree: a/ (3 PNGs, one nested, one bad), b/ (2 JPEGs), c/ empty,
 * a note that is not an image, dot-files left out. */
static void make_tree(void)
{
    static const char *dirs[] = {"tree", "tree/b", "tree/a", "tree/a/deeper", "tree/c", "tree/.hidden"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) mkdir_in(dirs[i]);
    char p[512];
    for (int i = 0; i < 3; i++) {
        uint8_t *px = pattern(12, 10, 1, 40 * i);
        static const char *names[] = {"tree/a/1.png", "tree/a/deeper/2.PNG", "tree/a/0.png"};
        path_in(p, sizeof p, names[i]);
        CHECK_OK(brg_image_write_png(p, px, 12, 10, 1));
        free(px);
    }
    for (int i = 0; i < 2; i++) {
        uint8_t *px = pattern(12, 10, 3, 100 + i);
        path_in(p, sizeof p, i ? "tree/b/y.jpeg" : "tree/b/x.jpg");
        CHECK_OK(brg_image_write_jpeg(p, px, 12, 10, 3, 90));
        free(px);
    }
    write_bytes("tree/a/bad.png", "not a png", 9);
    write_bytes("tree/a/notes.txt", "hello", 5);
    write_bytes("tree/a/.DS_Store", "x", 1);
}

static void test_folder(void)
{
    make_tree();
    char p[512];
    path_in(p, sizeof p, "tree");
    brg_image_folder *f = NULL;
    CHECK_OK(brg_image_folder_open(p, &f));
    if (!f) return;
    CHECK(brg_image_folder_classes(f) == 3);
    CHECK(strcmp(brg_image_folder_class_name(f, 0), "a") == 0 && strcmp(brg_image_folder_class_name(f, 2), "c") == 0);
    CHECK(brg_image_folder_class_count(f, 0) == 4 && brg_image_folder_class_count(f, 1) == 2 &&
          brg_image_folder_class_count(f, 2) == 0);
    CHECK(brg_image_folder_count(f) == 6);
    CHECK(strstr(brg_image_folder_path(f, 0), "tree/a/0.png") != NULL);
    CHECK(strstr(brg_image_folder_path(f, 3), "tree/a/deeper/2.PNG") != NULL);
    CHECK(brg_image_folder_label(f, 4) == 1 && brg_image_folder_label(f, 3) == 0);
    CHECK(brg_image_folder_ignored_count(f) == 1 && strstr(brg_image_folder_ignored(f, 0, NULL), "notes.txt"));
    CHECK(brg_image_folder_path(f, 6) == NULL && brg_image_folder_label(f, -1) == -1);

    /* A source: with skip_bad, bad.png (sample 2) is replaced by the next
     * readable one (sample 3, label 0); the bad file is reported once. */
    brg_image_transform t = brg_image_transform_init(1, 8, 8);
    t.resize = 10;
    brg_image_source *src = NULL;
    CHECK_OK(brg_image_source_create(f, &t, 1, &src));
    const brg_sample_source *ss = brg_image_source_samples(src);
    CHECK(ss->count == 6 && ss->sample_floats == 64);
    float a[64], b[64];
    int32_t la = -1, lb = -1;
    CHECK_OK(ss->read(ss->ctx, 2, 7, a, &la));
    CHECK_OK(ss->read(ss->ctx, 3, 7, b, &lb));
    CHECK(la == 0 && lb == 0 && memcmp(a, b, sizeof a) == 0);
    CHECK_OK(ss->read(ss->ctx, 2, 7, a, &la));
    CHECK(brg_image_source_bad_count(src) == 1);
    char bad[512], why[512];
    CHECK_OK(brg_image_source_bad(src, 0, bad, sizeof bad, why, sizeof why));
    CHECK(strstr(bad, "bad.png") && strstr(why, "neither a JPEG nor a PNG"));
    CHECK(brg_image_source_take_skipped(src) == 2 && brg_image_source_take_skipped(src) == 0);
    /* Grey PNGs and colour JPEGs into one channel: a JPEG's label is 1. */
    CHECK_OK(ss->read(ss->ctx, 4, 7, a, &la));
    CHECK(la == 1);
    brg_image_source_destroy(src);
    /* Without skip_bad the error names the file. */
    CHECK_OK(brg_image_source_create(f, &t, 0, &src));
    ss = brg_image_source_samples(src);
    CHECK_STATUS(ss->read(ss->ctx, 2, 7, a, &la), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("bad.png");
    brg_image_source_destroy(src);

    /* Split: stratified and seeded. */
    brg_image_folder *tr = NULL, *va = NULL, *tr2 = NULL, *va2 = NULL;
    CHECK_OK(brg_image_folder_split(f, 0.5, 3, &tr, &va));
    CHECK(brg_image_folder_count(tr) + brg_image_folder_count(va) == 6);
    CHECK(brg_image_folder_class_count(va, 0) == 2 && brg_image_folder_class_count(va, 1) == 1 &&
          brg_image_folder_classes(va) == 3);
    CHECK_OK(brg_image_folder_split(f, 0.5, 3, &tr2, &va2));
    int same = brg_image_folder_count(va) == brg_image_folder_count(va2);
    for (int64_t i = 0; same && i < brg_image_folder_count(va); i++)
        same = strcmp(brg_image_folder_path(va, i), brg_image_folder_path(va2, i)) == 0;
    CHECK(same);
    brg_image_folder_destroy(tr);
    brg_image_folder_destroy(va);
    brg_image_folder_destroy(tr2);
    brg_image_folder_destroy(va2);
    CHECK_STATUS(brg_image_folder_split(f, 1.0, 3, &tr2, &va2), BRG_ERR_INVALID_ARGUMENT);
    CHECK(tr2 == NULL && va2 == NULL);
    brg_image_folder_destroy(f);

    /* No class folders; images directly; a missing folder. */
    mkdir_in("flat");
    write_bytes("flat/x.png", "x", 1);
    path_in(p, sizeof p, "flat");
    CHECK_STATUS(brg_image_folder_open(p, &f), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("no class folders (it holds images directly)");
    CHECK(f == NULL);
    path_in(p, sizeof p, "nowhere");
    CHECK_STATUS(brg_image_folder_open(p, &f), BRG_ERR_IO);
    CHECK_ERROR_HAS("nowhere");
}

/* ---- the loader ---- */

/* Sample i: every float i + seed's low bits; label i % 7; sample fail_at
 * fails. Counts calls. */
typedef struct fake {
    int64_t fail_at;
    int delay_us;
    pthread_mutex_t lock;
    int64_t calls;
} fake;

static brg_status fake_read(void *ctx, int64_t index, uint64_t seed, float *image, int32_t *label)
{
    fake *f = ctx;
    pthread_mutex_lock(&f->lock);
    f->calls++;
    pthread_mutex_unlock(&f->lock);
    if (f->delay_us) usleep((useconds_t)(f->delay_us * (1 + index % 3)));
    if (index == f->fail_at) {
        brg_status st = brg_image_read("/nonexistent/fake-sample.png", 1, 0, &(brg_image){0});
        return st;
    }
    for (int k = 0; k < 5; k++) image[k] = (float)index + (float)(seed & 0xff) / 256.0f + (float)k;
    *label = (int32_t)(index % 7);
    return BRG_OK;
}

/* Every batch of a pass over a shuffled order, flattened. */
static int64_t run_pass(brg_loader *l, const int64_t *order, int64_t count, int64_t first, float *img, int32_t *lab,
                        brg_status *last)
{
    int64_t got = 0, n = 0;
    *last = brg_loader_start(l, order, count, first, 99);
    if (*last != BRG_OK) return 0;
    for (;;) {
        const float *bi;
        const int32_t *bl;
        *last = brg_loader_next(l, &bi, &bl, &n, NULL);
        if (*last != BRG_OK || n == 0) break;
        memcpy(img + got * 5, bi, (size_t)n * 5 * sizeof *img);
        memcpy(lab + got, bl, (size_t)n * sizeof *lab);
        got += n;
    }
    return got;
}

static void test_loader(void)
{
    fake fk = {-1, 0, PTHREAD_MUTEX_INITIALIZER, 0};
    brg_sample_source src = {100, 5, fake_read, &fk, 0};
    int64_t order[100];
    CHECK_OK(brg_shuffle_indices(order, 100, 5));
    float want[500], got[500];
    int32_t wl[100], gl[100];
    brg_status st;
    /* The reference: threads 0 (made in the caller's thread). */
    brg_loader_options o = brg_loader_options_init();
    CHECK(o.threads == 1 && o.depth == 2);
    o.threads = 0;
    brg_loader *l = NULL;
    CHECK_OK(brg_loader_create(&src, 8, &o, &l));
    CHECK(run_pass(l, order, 100, 0, want, wl, &st) == 100 && st == BRG_OK);
    CHECK(brg_loader_host_bytes(l) == 8 * (5 * 4 + 4));
    brg_loader_destroy(l);
    int right = 1;
    for (int i = 0; i < 100; i++)
        right &= wl[i] == order[i] % 7 &&
                 want[i * 5] == (float)order[i] + (float)(brg_loader_sample_seed(99, order[i]) & 0xff) / 256.0f;
    CHECK(right);
    /* Any thread count and depth: the same batches; with delays that make
     * threads finish out of order. */
    fk.delay_us = 200;
    const int configs[][2] = {{1, 1}, {2, 2}, {4, 1}, {3, 5}};
    for (int c = 0; c < 4; c++) {
        o.threads = configs[c][0];
        o.depth = configs[c][1];
        CHECK_OK(brg_loader_create(&src, 8, &o, &l));
        memset(got, 0, sizeof got);
        CHECK(run_pass(l, order, 100, 0, got, gl, &st) == 100 && st == BRG_OK);
        CHECK_MSG(memcmp(got, want, sizeof got) == 0 && memcmp(gl, wl, sizeof gl) == 0, "threads %d depth %d",
                  o.threads, o.depth);
        CHECK(brg_loader_host_bytes(l) == (size_t)(o.depth + 1) * 8 * (5 * 4 + 4));
        /* From batch 5: the rest of the same pass. */
        CHECK(run_pass(l, order, 100, 5, got, gl, &st) == 60 && st == BRG_OK);
        CHECK(memcmp(got, want + 40 * 5, 60 * 5 * sizeof *got) == 0);
        /* Restart in the middle of a pass. */
        const float *bi;
        const int32_t *bl;
        int64_t n;
        CHECK_OK(brg_loader_start(l, order, 100, 0, 99));
        CHECK_OK(brg_loader_next(l, &bi, &bl, &n, NULL));
        CHECK(run_pass(l, NULL, 20, 0, got, gl, &st) == 20 && st == BRG_OK);
        CHECK(gl[3] == 3 && gl[19] == 19 % 7);
        brg_loader_destroy(l);
    }
    /* Batches in a device's host memory for copies (pinned on CUDA; here a
     * CPU device's aligned memory): the same batches, aligned buffers. */
    brg_device *dev = NULL;
    CHECK_OK(brg_device_create_cpu(1 << 20, 0, &dev));
    o.threads = 2;
    o.depth = 2;
    o.host_memory_of = dev;
    CHECK_OK(brg_loader_create(&src, 8, &o, &l));
    if (l) {
        const float *bi;
        const int32_t *bl;
        int64_t n;
        CHECK_OK(brg_loader_start(l, order, 100, 0, 99));
        CHECK_OK(brg_loader_next(l, &bi, &bl, &n, NULL));
        CHECK(n == 8 && (uintptr_t)bi % BRG_ARENA_ALIGN == 0 && (uintptr_t)bl % BRG_ARENA_ALIGN == 0);
        CHECK(memcmp(bi, want, 8 * 5 * sizeof *bi) == 0 && memcmp(bl, wl, 8 * sizeof *bl) == 0);
        memset(got, 0, sizeof got);
        CHECK(run_pass(l, order, 100, 0, got, gl, &st) == 100 && st == BRG_OK);
        CHECK(memcmp(got, want, sizeof got) == 0 && memcmp(gl, wl, sizeof gl) == 0);
    }
    brg_loader_destroy(l);
    brg_device_destroy(dev);
    o.host_memory_of = NULL;
    /* A failure: batches before it arrive whole, its batch gives the
     * source's message, and the pass is over. */
    fk.delay_us = 0;
    fk.fail_at = order[43]; /* batch 5 */
    for (int threads = 0; threads <= 3; threads += 3) {
        o.threads = threads;
        o.depth = 2;
        CHECK_OK(brg_loader_create(&src, 8, &o, &l));
        CHECK(run_pass(l, order, 100, 0, got, gl, &st) == 40);
        CHECK_MSG(st == BRG_ERR_IO, "threads %d: %s", threads, brg_status_string(st));
        CHECK_ERROR_HAS("fake-sample.png");
        const float *bi;
        const int32_t *bl;
        int64_t n = 5;
        CHECK_OK(brg_loader_next(l, &bi, &bl, &n, NULL));
        CHECK(n == 0);
        /* A new pass runs clean where the sample is not. */
        CHECK(run_pass(l, NULL, 40, 0, got, gl, &st) == 40 && st == BRG_OK);
        brg_loader_destroy(l);
    }
    /* Bad arguments. */
    o.threads = 1;
    CHECK_STATUS(brg_loader_create(&src, 0, &o, &l), BRG_ERR_INVALID_ARGUMENT);
    CHECK_OK(brg_loader_create(&src, 8, &o, &l));
    CHECK_STATUS(brg_loader_start(l, NULL, 101, 0, 1), BRG_ERR_INVALID_ARGUMENT);
    int64_t outside[2] = {0, 100};
    CHECK_OK(brg_loader_start(l, outside, 2, 0, 1));
    const float *bi;
    const int32_t *bl;
    int64_t n;
    CHECK_STATUS(brg_loader_next(l, &bi, &bl, &n, NULL), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("outside 0..99");
    brg_loader_destroy(l);
    brg_loader_destroy(NULL);
}

/* img reduced by k: each k x k box (fewer at the right and bottom) its
 * rounded mean, the reference for a reduced PNG decode. */
static uint8_t *box_means(const brg_image *img, int k, int *w, int *h)
{
    const int C = img->channels;
    *w = (img->width + k - 1) / k;
    *h = (img->height + k - 1) / k;
    uint8_t *r = malloc((size_t)*w * (size_t)*h * (size_t)C);
    for (int y = 0; y < *h; y++)
        for (int x = 0; x < *w; x++)
            for (int c = 0; c < C; c++) {
                unsigned sum = 0, n = 0;
                for (int yy = y * k; yy < img->height && yy < (y + 1) * k; yy++)
                    for (int xx = x * k; xx < img->width && xx < (x + 1) * k; xx++, n++)
                        sum += img->pixels[((size_t)yy * (size_t)img->width + (size_t)xx) * (size_t)C + (size_t)c];
                r[((size_t)y * (size_t)*w + (size_t)x) * (size_t)C + (size_t)c] = (uint8_t)((sum + n / 2) / n);
            }
    return r;
}

/* The tile value of the large PNG below at (x, y): 1500-pixel squares, so
 * 12000 x 12000 grey pixels compress to a few hundred KiB. */
static uint8_t tile(int x, int y) { return (uint8_t)(x / 1500 * 30 + y / 1500 * 17); }

/* A 12000 x 12000 grey PNG of tiles, encoded a row at a time (the test's
 * own peak stays small). */
static void write_tiled_png(const char *rel, int side)
{
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    struct spng_ihdr ihdr = {(uint32_t)side, (uint32_t)side, 8, SPNG_COLOR_TYPE_GRAYSCALE, 0, 0, 0};
    uint8_t *row = malloc((size_t)side);
    spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
    spng_set_ihdr(ctx, &ihdr);
    int err = spng_encode_image(ctx, NULL, 0, SPNG_FMT_PNG, SPNG_ENCODE_PROGRESSIVE | SPNG_ENCODE_FINALIZE);
    for (int y = 0; !err && y < side; y++) {
        for (int x = 0; x < side; x++) row[x] = tile(x, y);
        err = spng_encode_row(ctx, row, (size_t)side);
    }
    CHECK_MSG(err == SPNG_EOI, "spng: %s", spng_strerror(err));
    size_t n = 0;
    void *png = spng_get_png_buffer(ctx, &n, &err);
    CHECK_MSG(png && err == 0, "spng: %s", spng_strerror(err));
    if (png) write_bytes(rel, png, n);
    free(png);
    free(row);
    spng_ctx_free(ctx);
}

/* A kB figure from /proc/self/status ("VmRSS", "VmHWM"), -1 without one. */
static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    const size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') kb = strtol(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* PNGs above 2^22 pixels decode reduced by an integer factor when the
 * resize allows it: box means of the full decode, exactly, plain and
 * interlaced; smaller ones decode whole, as before; and a 12000 x 12000 one
 * decodes in a few MiB, not the 550 MiB of its pixels. */
static void test_png_reduced(void)
{
    char p[512];
    brg_image img, full;
    /* Small: whole, the same pixels with or without a resize. */
    uint8_t *small = pattern(64, 48, 3, 9);
    path_in(p, sizeof p, "small.png");
    CHECK_OK(brg_image_write_png(p, small, 64, 48, 3));
    CHECK_OK(brg_image_read(p, 3, 8, &img));
    CHECK(img.width == 64 && img.height == 48 && memcmp(img.pixels, small, 64 * 48 * 3) == 0);
    brg_image_free(&img);
    free(small);

    /* 2101 x 2003 = 4.2 Mpixels, shorter side 500 or more: reduced by 4 to
     * 526 x 501, partial boxes at both edges. */
    const int W = 2101, H = 2003;
    uint8_t *big = pattern(W, H, 3, 5);
    for (int interlace = 0; interlace <= 1; interlace++) {
        const char *rel = interlace ? "big-adam7.png" : "big.png";
        write_png_raw(rel, big, (size_t)W * H * 3, W, H, SPNG_COLOR_TYPE_TRUECOLOR, 8, NULL, interlace);
        path_in(p, sizeof p, rel);
        for (int channels = 1; channels <= 3; channels += 2) {
            CHECK_OK(brg_image_read(p, channels, 0, &full));
            CHECK(full.width == W && full.height == H);
            CHECK_OK(brg_image_read(p, channels, 500, &img));
            int w = 0, h = 0;
            uint8_t *want = full.pixels ? box_means(&full, 4, &w, &h) : NULL;
            CHECK_MSG(img.width == 526 && img.height == 501 && img.channels == channels,
                      "%s reduced to %dx%dx%d", rel, img.width, img.height, img.channels);
            CHECK_MSG(want && img.pixels && w == img.width && h == img.height &&
                          memcmp(img.pixels, want, (size_t)w * h * channels) == 0,
                      "%s, %d channels: not the box means of the full decode", rel, channels);
            free(want);
            brg_image_free(&img);
            brg_image_free(&full);
            /* The shorter side may not fall under min_side: 2003 / 1001 is 2. */
            CHECK_OK(brg_image_read(p, channels, 1001, &img));
            CHECK(img.width == 1051 && img.height == 1002);
            brg_image_free(&img);
        }
        /* Cut short, the streamed decode fails as the whole one does. */
        size_t len = 0;
        uint8_t *bytes = read_bytes(rel, &len);
        CHECK_STATUS(brg_image_decode(bytes, len / 2, 3, 500, rel, &img), BRG_ERR_FORMAT);
        CHECK_ERROR_HAS("corrupt or truncated PNG");
        CHECK(img.pixels == NULL && img.width == 0);
        free(bytes);
    }
    free(big);

    /* Memory: in a child, so that the peak (VmHWM) starts from the RSS of
     * now, not from whatever this process held before. */
    const int side = 12000;
    write_tiled_png("huge.png", side);
    path_in(p, sizeof p, "huge.png");
    const pid_t pid = fork();
    if (pid == 0) {
        const long rss = status_kb("VmRSS");
        brg_image huge;
        int bad = brg_image_read(p, 3, 224, &huge) != BRG_OK;
        const long peak = status_kb("VmHWM");
        /* 12000 / 224: reduced by 53, to 227 x 227 (the last box 22 wide). */
        bad |= huge.width != 227 || huge.height != 227;
        for (int y = 0; !bad && y < 226; y += 15)
            for (int x = 0; x < 226; x += 15) {
                const int x0 = x * 53, y0 = y * 53;
                /* Boxes within one tile are that tile's value. */
                if (x0 / 1500 == (x0 + 52) / 1500 && y0 / 1500 == (y0 + 52) / 1500)
                    bad |= huge.pixels[((size_t)y * 227 + (size_t)x) * 3 + 1] != tile(x0, y0);
            }
        brg_image_free(&huge);
        if (rss >= 0 && peak >= 0) {
            printf("  a %dx%d PNG reduced to 227x227: the peak grew %ld KiB (its RGBA pixels: %lld MiB)\n", side,
                   side, peak - rss, (long long)side * side * 4 >> 20);
            bad |= (peak - rss) > 32 * 1024;
        } else {
            printf("  no /proc/self/status: the peak is not measured\n");
        }
        fflush(stdout);
        _exit(bad);
    }
    int wstatus = 0;
    CHECK(pid > 0 && waitpid(pid, &wstatus, 0) == pid);
    CHECK_MSG(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0,
              "the 12000 x 12000 PNG: wrong pixels or a peak over 32 MiB (status %#x)", wstatus);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/brg-images-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_png();
    test_png_reduced();
    test_jpeg();
    test_transform();
    test_folder();
    test_loader();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    TEST_EXIT();
}

/* Segmentation data: masks decoded as label maps (grey and palette, 1 to 8
 * bits), the joint transform (the mask stays on its image under every crop
 * and flip, nearest neighbour keeps only the mask's own values and matches
 * a plain reference), segmentation folders (pairing, what is left out, the
 * split), a folder as a source (bad values, sizes and files named; skip
 * and fail), and the loader with several labels per sample. */
#include <pthread.h>
#include <spng.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char tmp[256];

static void path_in(char *buf, size_t size, const char *rel) { snprintf(buf, size, "%s/%s", tmp, rel); }

static void mkdir_in(const char *rel)
{
    char p[512];
    path_in(p, sizeof p, rel);
    mkdir(p, 0755);
}

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

/* A PNG of any colour type and depth through spng (pixels as the PNG
 * stores them: packed below 8 bits). */
static void write_png_raw(const char *rel, const void *pixels, size_t len, int w, int h, int color_type, int depth)
{
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    struct spng_ihdr ihdr = {(uint32_t)w, (uint32_t)h, (uint8_t)depth, (uint8_t)color_type, 0, 0, 0};
    spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
    spng_set_ihdr(ctx, &ihdr);
    if (color_type == SPNG_COLOR_TYPE_INDEXED) {
        struct spng_plte plte = {0};
        plte.n_entries = 1u << depth;
        for (uint32_t i = 0; i < plte.n_entries; i++) plte.entries[i].red = (uint8_t)(i * 3);
        spng_set_plte(ctx, &plte);
    }
    int err = spng_encode_image(ctx, pixels, len, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
    CHECK_MSG(err == 0, "spng: %s", spng_strerror(err));
    size_t n = 0;
    void *png = spng_get_png_buffer(ctx, &n, &err);
    write_bytes(rel, png, n);
    free(png);
    spng_ctx_free(ctx);
}

static uint64_t rng_state = 12345;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

static void test_mask_decode(void)
{
    char p[512];
    brg_image m;
    /* 8-bit grey: the bytes themselves. */
    uint8_t grey[12] = {0, 1, 2, 255, 7, 0, 3, 3, 9, 200, 1, 0};
    path_in(p, sizeof p, "grey.png");
    CHECK_OK(brg_image_write_png(p, grey, 4, 3, 1));
    CHECK_OK(brg_mask_read(p, &m));
    CHECK(m.width == 4 && m.height == 3 && m.channels == 1 && memcmp(m.pixels, grey, 12) == 0);
    brg_image_free(&m);
    /* 4-bit palette, 5 x 2: the indices (not the palette's colours). */
    const uint8_t pal4[6] = {0x01, 0x23, 0x40, 0x56, 0x78, 0x90};
    write_png_raw("pal4.png", pal4, 6, 5, 2, SPNG_COLOR_TYPE_INDEXED, 4);
    path_in(p, sizeof p, "pal4.png");
    CHECK_OK(brg_mask_read(p, &m));
    const uint8_t want4[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK_MSG(m.pixels && m.width == 5 && memcmp(m.pixels, want4, 10) == 0, "4-bit palette indices");
    brg_image_free(&m);
    /* 1-bit grey, 10 x 1: 0 and 1, unscaled. */
    const uint8_t bits[2] = {0xa5, 0xc0}; /* 1010 0101 11 */
    write_png_raw("bits.png", bits, 2, 10, 1, SPNG_COLOR_TYPE_GRAYSCALE, 1);
    path_in(p, sizeof p, "bits.png");
    CHECK_OK(brg_mask_read(p, &m));
    const uint8_t want1[10] = {1, 0, 1, 0, 0, 1, 0, 1, 1, 1};
    CHECK_MSG(m.pixels && memcmp(m.pixels, want1, 10) == 0, "1-bit grey values");
    brg_image_free(&m);
    /* 2-bit grey, 3 x 2 (rows padded to a byte). */
    const uint8_t two[2] = {0x6c, 0xe4}; /* 01 10 11 | 11 10 01 */
    write_png_raw("two.png", two, 2, 3, 2, SPNG_COLOR_TYPE_GRAYSCALE, 2);
    path_in(p, sizeof p, "two.png");
    CHECK_OK(brg_mask_read(p, &m));
    const uint8_t want2[6] = {1, 2, 3, 3, 2, 1};
    CHECK_MSG(m.pixels && memcmp(m.pixels, want2, 6) == 0, "2-bit grey values");
    brg_image_free(&m);
    /* Not masks: RGB, 16-bit grey, a JPEG, text, empty, truncated. */
    uint8_t rgb[12] = {0};
    path_in(p, sizeof p, "rgb.png");
    CHECK_OK(brg_image_write_png(p, rgb, 2, 2, 3));
    CHECK_STATUS(brg_mask_read(p, &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("rgb.png: the PNG is RGB, 8 bits a sample; a mask is a grey or palette PNG");
    CHECK(m.pixels == NULL);
    uint16_t deep[2] = {1, 2};
    write_png_raw("deep.png", deep, 4, 2, 1, SPNG_COLOR_TYPE_GRAYSCALE, 16);
    path_in(p, sizeof p, "deep.png");
    CHECK_STATUS(brg_mask_read(p, &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("deep.png: the PNG is grey, 16 bits");
    path_in(p, sizeof p, "grey.jpg");
    CHECK_OK(brg_image_write_jpeg(p, grey, 4, 3, 1, 90));
    CHECK_STATUS(brg_mask_read(p, &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("a mask must be a PNG");
    CHECK_STATUS(brg_mask_decode("hello", 5, "t.png", &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("t.png: not a PNG mask");
    CHECK_STATUS(brg_mask_decode("", 0, "e.png", &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("empty");
    FILE *f = fopen((path_in(p, sizeof p, "grey.png"), p), "rb");
    uint8_t buf[256];
    const size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(n > 40);
    CHECK_STATUS(brg_mask_decode(buf, n - 20, "cut.png", &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("cut.png");
    path_in(p, sizeof p, "nowhere.png");
    CHECK_STATUS(brg_mask_read(p, &m), BRG_ERR_IO);
}

/* Class colours at the corners of a tetrahedron (affinely independent: no
 * blend of several is ever one of them): classes 0, 1, 2 and the ignore
 * label 255. */
static const uint8_t class_rgb[4][3] = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
static int colour_of(int label) { return label == 255 ? 3 : label; }

/* An image and its mask of blocks of side `block`, random classes. */
static void blocks(int w, int h, int block, brg_image *img, brg_image *mask)
{
    *img = (brg_image){w, h, 3, malloc((size_t)w * h * 3)};
    *mask = (brg_image){w, h, 1, malloc((size_t)w * h)};
    const int bw = (w + block - 1) / block, bh = (h + block - 1) / block;
    uint8_t *cls = malloc((size_t)bw * bh);
    for (int i = 0; i < bw * bh; i++) {
        const int r = (int)(rnd() % 4);
        cls[i] = (uint8_t)(r == 3 ? 255 : r);
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t c = cls[(y / block) * bw + x / block];
            mask->pixels[(size_t)y * w + x] = c;
            memcpy(img->pixels + ((size_t)y * w + x) * 3, class_rgb[colour_of(c)], 3);
        }
    free(cls);
}

/* The class whose colour pixel i of out has exactly (normalised by t), or
 * -1 for a blend. */
static int pure_class(const float *out, int64_t plane, int64_t i, const brg_image_transform *t)
{
    for (int k = 0; k < 4; k++) {
        int same = 1;
        for (int c = 0; c < 3; c++) {
            const float want = ((float)class_rgb[k][c] / 255.0f - t->mean[c]) * (1.0f / t->std[c]);
            same &= fabsf(out[c * plane + i] - want) <= 1e-4f;
        }
        if (same) return k == 3 ? 255 : k;
    }
    return -1;
}

static void test_joint_alignment(void)
{
    /* Without a resize (a resize equal to the shorter side is the
     * identity): every output pixel's colour is its label's, under every
     * crop and flip. */
    brg_image img, mask;
    blocks(41, 30, 3, &img, &mask);
    brg_image_transform t = brg_seg_transform_init(3, 24, 24);
    CHECK(t.resize == 24);
    t.resize = 30;
    t.random = t.flip = 1;
    const int64_t plane = 24 * 24;
    float *out = malloc(3 * plane * sizeof *out), *plain = malloc(3 * plane * sizeof *plain);
    int32_t *lab = malloc(plane * sizeof *lab);
    int all = 1, flips = 0, same_as_image = 1;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        CHECK_OK(brg_image_transform_apply_mask(&img, &mask, &t, seed, out, lab));
        for (int64_t i = 0; i < plane; i++) all &= pure_class(out, plane, i, &t) == lab[i];
        /* The image half is exactly the classification transform's. */
        CHECK_OK(brg_image_transform_apply(&img, &t, seed, plain));
        same_as_image &= memcmp(out, plain, 3 * plane * sizeof *out) == 0;
        /* Flipped: the output's first column came from the window's last. */
        flips += lab[0] != mask.pixels[0] || lab[23] != mask.pixels[23];
    }
    CHECK_MSG(all, "a label differs from its pixel's colour without resizing");
    CHECK(same_as_image);
    CHECK_MSG(flips > 5, "%d of 40 windows differ from the corner", flips);
    brg_image_free(&img);
    brg_image_free(&mask);

    /* Shrinking (by 2.5) and enlarging (by 1.6): blends appear at block
     * edges, but a pixel whose colour is exactly a class colour carries
     * that label, and most pixels are such. */
    const int sizes[2][3] = {{120, 80, 20}, {30, 20, 6}}; /* w, h, block */
    for (int s = 0; s < 2; s++) {
        blocks(sizes[s][0], sizes[s][1], sizes[s][2], &img, &mask);
        t.resize = 32;
        for (int random = 0; random < 2; random++) {
            t.random = t.flip = random;
            int64_t pure = 0, wrong = 0, total = 0;
            for (uint64_t seed = 1; seed <= 20; seed++) {
                CHECK_OK(brg_image_transform_apply_mask(&img, &mask, &t, seed, out, lab));
                for (int64_t i = 0; i < plane; i++) {
                    const int k = pure_class(out, plane, i, &t);
                    total++;
                    if (k < 0) continue;
                    pure++;
                    wrong += k != lab[i];
                }
            }
            CHECK_MSG(wrong == 0, "size %d random %d: %lld pure pixels carry another label", s, random,
                      (long long)wrong);
            CHECK_MSG(pure * 2 > total, "size %d: only %lld of %lld pixels are pure", s, (long long)pure,
                      (long long)total);
        }
        brg_image_free(&img);
        brg_image_free(&mask);
    }
    free(out);
    free(plain);
    free(lab);
}

/* The reference nearest neighbour: double precision, over the whole
 * resized mask, then the window and the flip. */
static void nearest_reference(const brg_image *m, int rw, int rh, int x0, int y0, int flip, int W, int H, int32_t *out)
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int sx = (int)floor((x0 + x + 0.5) * (double)m->width / rw);
            int sy = (int)floor((y0 + y + 0.5) * (double)m->height / rh);
            if (sx >= m->width) sx = m->width - 1;
            if (sy >= m->height) sy = m->height - 1;
            out[y * W + (flip ? W - 1 - x : x)] = m->pixels[sy * m->width + sx];
        }
}

static void test_nearest(void)
{
    static const uint8_t values[4] = {0, 3, 7, 255};
    brg_image mask = {37, 29, 1, malloc(37 * 29)}, img = {37, 29, 1, calloc(37 * 29, 1)};
    for (int i = 0; i < 37 * 29; i++) mask.pixels[i] = values[rnd() % 4];
    brg_image_transform t = brg_seg_transform_init(1, 10, 12);
    CHECK(t.resize == 12 && t.mean[0] == 0.0f && t.std[0] == 1.0f);
    float out[120];
    int32_t lab[120], ref[120];
    const int resizes[3] = {12, 20, 50}; /* shrink, shrink less, enlarge */
    for (int r = 0; r < 3; r++) {
        t.resize = resizes[r];
        /* 29 is the shorter side: 37 * resize / 29, truncated. */
        const int rh = resizes[r], rw = 37 * resizes[r] / 29;
        for (int random = 0; random < 2; random++) {
            t.random = t.flip = random;
            for (uint64_t seed = 0; seed < 8; seed++) {
                CHECK_OK(brg_image_transform_apply_mask(&img, &mask, &t, seed, out, lab));
                int only = 1;
                for (int i = 0; i < 120; i++)
                    only &= lab[i] == 0 || lab[i] == 3 || lab[i] == 7 || lab[i] == 255;
                CHECK_MSG(only, "resize %d: a label that is not in the mask", resizes[r]);
                /* Some window and flip of the reference gives exactly these labels. */
                int found = 0;
                for (int f = 0; f < 2 && !found; f++)
                    for (int y0 = 0; y0 <= rh - 10 && !found; y0++)
                        for (int x0 = 0; x0 <= rw - 12 && !found; x0++) {
                            nearest_reference(&mask, rw, rh, x0, y0, f, 12, 10, ref);
                            found = memcmp(ref, lab, sizeof lab) == 0;
                        }
                CHECK_MSG(found, "resize %d seed %llu: no window of the reference matches", resizes[r],
                          (unsigned long long)seed);
                if (!random) { /* the centre, as the image's */
                    nearest_reference(&mask, rw, rh, (int)rint((rw - 12) / 2.0), (int)rint((rh - 10) / 2.0), 0, 12, 10,
                                      ref);
                    CHECK(memcmp(ref, lab, sizeof lab) == 0);
                }
            }
        }
    }
    /* A mask of another size, or of 3 channels. */
    brg_image small = {36, 29, 1, mask.pixels};
    CHECK_STATUS(brg_image_transform_apply_mask(&img, &small, &t, 0, out, lab), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("the mask is 36x29 and the image 37x29");
    brg_image three = {37, 29, 3, mask.pixels};
    CHECK_STATUS(brg_image_transform_apply_mask(&img, &three, &t, 0, out, lab), BRG_ERR_INVALID_ARGUMENT);
    free(mask.pixels);
    free(img.pixels);
}

/* A pair: an RGB image (PNG or JPEG) whose red is its label's, and a mask. */
static void write_pair(const char *image_rel, const char *mask_rel, int w, int h, int mw, int mh, uint8_t bad_value,
                       int jpeg)
{
    char p[512];
    uint8_t *px = malloc((size_t)w * h * 3), *m = malloc((size_t)mw * mh);
    for (int y = 0; y < mh; y++)
        for (int x = 0; x < mw; x++) m[y * mw + x] = (uint8_t)((x / 4 + y / 4) % 3);
    if (bad_value) m[5 * mw + 6] = m[7 * mw + 2] = bad_value;
    for (int i = 0; i < w * h; i++) {
        const int label = i % w < mw && i / w < mh ? m[(i / w) * mw + i % w] : 0;
        px[i * 3] = (uint8_t)(label * 100), px[i * 3 + 1] = 50, px[i * 3 + 2] = 20;
    }
    path_in(p, sizeof p, image_rel);
    CHECK_OK(jpeg ? brg_image_write_jpeg(p, px, w, h, 3, 95) : brg_image_write_png(p, px, w, h, 3));
    if (mask_rel) {
        path_in(p, sizeof p, mask_rel);
        CHECK_OK(brg_image_write_png(p, m, mw, mh, 1));
    }
    free(px);
    free(m);
}

static void make_seg_tree(void)
{
    static const char *dirs[] = {"seg", "seg/images", "seg/masks", "seg/images/sub", "seg/masks/.hidden"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) mkdir_in(dirs[i]);
    write_pair("seg/images/a.png", "seg/masks/a.png", 20, 16, 20, 16, 0, 0);
    write_pair("seg/images/b.jpg", "seg/masks/b.png", 20, 16, 20, 16, 0, 1);
    write_pair("seg/images/c.png", "seg/masks/c.png", 20, 16, 18, 16, 0, 0);  /* the mask is narrower */
    write_pair("seg/images/d.png", "seg/masks/d.png", 20, 16, 20, 16, 9, 0);  /* a value above the classes */
    write_pair("seg/images/e.png", NULL, 20, 16, 20, 16, 0, 0);               /* no mask */
    write_pair("seg/images/f.png", "seg/masks/f.PNG", 20, 16, 20, 16, 0, 0);  /* a mask's extension in capitals */
    write_pair("seg/images/g.png", "seg/masks/g.png", 20, 16, 20, 16, 0, 0);
    write_pair("seg/images/g.jpeg", NULL, 20, 16, 20, 16, 0, 1);             /* two images named g */
    write_pair("seg/images/z.png", "seg/masks/orphan.png", 20, 16, 20, 16, 0, 0);
    write_bytes("seg/images/notes.txt", "hello", 5);
    write_bytes("seg/masks/h.jpg", "\xff\xd8\xff", 3);
    write_bytes("seg/images/.DS_Store", "x", 1);
}

static void test_seg_folder(void)
{
    make_seg_tree();
    char p[512];
    path_in(p, sizeof p, "seg");
    CHECK(brg_seg_folder_detect(p) == 1);
    brg_seg_folder *f = NULL;
    CHECK_OK(brg_seg_folder_open(p, &f));
    if (!f) return;
    /* Pairs in image name order: a, b, c, d, f. */
    CHECK_MSG(brg_seg_folder_count(f) == 5, "%lld pairs", (long long)brg_seg_folder_count(f));
    static const char *want_images[5] = {"/images/a.png", "/images/b.jpg", "/images/c.png", "/images/d.png",
                                         "/images/f.png"};
    static const char *want_masks[5] = {"/masks/a.png", "/masks/b.png", "/masks/c.png", "/masks/d.png",
                                        "/masks/f.PNG"};
    for (int i = 0; i < 5; i++) {
        const char *im = brg_seg_folder_image(f, i), *ma = brg_seg_folder_mask(f, i);
        CHECK_MSG(im && strstr(im, want_images[i]) && ma && strstr(ma, want_masks[i]), "pair %d: %s %s", i,
                  im ? im : "-", ma ? ma : "-");
    }
    CHECK(brg_seg_folder_image(f, 5) == NULL && brg_seg_folder_mask(f, -1) == NULL);
    /* Left out, each with its reason, images/ first. */
    static const char *want_ignored[][2] = {
        {"/images/sub", "a folder"},
        {"/images/e.png", "has no mask ("},
        {"/images/g.jpeg", "another image in"},
        {"/images/g.png", "another image in"},
        {"/images/notes.txt", "not a .jpg, .jpeg or .png image"},
        {"/images/z.png", "has no mask"},
        {"/masks/g.png", "two images in"},
        {"/masks/h.jpg", "a mask must be a PNG"},
        {"/masks/orphan.png", "has no image in"},
    };
    const int64_t n_ign = brg_seg_folder_ignored_count(f);
    CHECK_MSG(n_ign == 9, "%lld ignored", (long long)n_ign);
    for (int64_t i = 0; i < n_ign && i < 9; i++) {
        const char *why = NULL, *path = brg_seg_folder_ignored(f, i, &why);
        CHECK_MSG(path && strstr(path, want_ignored[i][0]) && why && strstr(why, want_ignored[i][1]),
                  "ignored %lld: %s (%s), expected %s (%s)", (long long)i, path ? path : "-", why ? why : "-",
                  want_ignored[i][0], want_ignored[i][1]);
    }
    const char *why = NULL;
    brg_seg_folder_ignored(f, 1, &why);
    CHECK(why && strstr(why, "seg/masks/e.png"));

    /* A source over it: 3 classes, ignore 255, an 8 x 8 input, resize 16. */
    brg_image_transform t = brg_seg_transform_init(3, 8, 8);
    CHECK(t.resize == 8);
    t.resize = 16;
    brg_image_source *src = NULL;
    CHECK_OK(brg_seg_source_create(f, &t, 3, 255, 1, &src));
    const brg_sample_source *ss = brg_image_source_samples(src);
    CHECK(ss->count == 5 && ss->sample_floats == 3 * 64 && ss->label_count == 64);
    float a[192], b[192];
    int32_t la[64], lb[64];
    CHECK_OK(ss->read(ss->ctx, 0, 7, a, la));
    int ok = 1;
    for (int i = 0; i < 64; i++) ok &= la[i] >= 0 && la[i] < 3;
    CHECK(ok);
    /* c (a narrower mask) and d (a value of 9) are skipped: samples 2 and
     * 3 read as sample 4 (f), with f's labels. */
    CHECK_OK(ss->read(ss->ctx, 2, 7, a, la));
    CHECK_OK(ss->read(ss->ctx, 4, 7, b, lb));
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(la, lb, sizeof la) == 0);
    CHECK_OK(ss->read(ss->ctx, 3, 7, a, la));
    CHECK(memcmp(la, lb, sizeof la) == 0);
    CHECK(brg_image_source_bad_count(src) == 2);
    char bad[512], msg[1024];
    CHECK_OK(brg_image_source_bad(src, 0, bad, sizeof bad, msg, sizeof msg));
    CHECK_MSG(strstr(bad, "masks/c.png") && strstr(msg, "masks/c.png is 18x16, but its image") &&
              strstr(msg, "images/c.png is 20x16"), "%s: %s", bad, msg);
    CHECK_OK(brg_image_source_bad(src, 1, bad, sizeof bad, msg, sizeof msg));
    CHECK_MSG(strstr(bad, "masks/d.png") && strstr(msg, "masks/d.png: pixel (6, 5) (x, y) holds 9") &&
              strstr(msg, "neither a class (0..2) nor the ignore label 255") && strstr(msg, "2 pixels"), "%s: %s", bad,
              msg);
    CHECK(brg_image_source_take_skipped(src) == 2);
    /* The labels follow the image: red is 100 x label (PNG: exact). */
    t.resize = 0;
    t.random = t.flip = 1;
    brg_image_source_destroy(src);
    CHECK_OK(brg_seg_source_create(f, &t, 3, 255, 1, &src));
    ss = brg_image_source_samples(src);
    for (uint64_t seed = 0; seed < 6; seed++) {
        CHECK_OK(ss->read(ss->ctx, 0, seed, a, la));
        int aligned = 1;
        for (int i = 0; i < 64; i++) {
            const float red = (float)(la[i] * 100) / 255.0f;
            aligned &= fabsf(a[i] - (red - t.mean[0]) / t.std[0]) < 1e-4f;
        }
        CHECK_MSG(aligned, "seed %llu: labels off their pixels", (unsigned long long)seed);
    }
    brg_image_source_destroy(src);
    /* With ignore label 9, d's mask is fine; without skip_bad, c stops. */
    CHECK_OK(brg_seg_source_create(f, &t, 3, 9, 0, &src));
    ss = brg_image_source_samples(src);
    CHECK_OK(ss->read(ss->ctx, 3, 1, a, la));
    int nines = 0;
    for (int i = 0; i < 64; i++) nines += la[i] == 9;
    CHECK(nines <= 2);
    CHECK_STATUS(ss->read(ss->ctx, 2, 1, a, la), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("masks/c.png is 18x16");
    CHECK(brg_image_source_bad_count(src) == 0);
    brg_image_source_destroy(src);
    CHECK_STATUS(brg_seg_source_create(f, &t, 0, 255, 0, &src), BRG_ERR_INVALID_ARGUMENT);

    /* Split: seeded, every pair in exactly one part. */
    brg_seg_folder *tr = NULL, *va = NULL, *tr2 = NULL, *va2 = NULL;
    CHECK_OK(brg_seg_folder_split(f, 0.4, 3, &tr, &va));
    CHECK(brg_seg_folder_count(tr) == 3 && brg_seg_folder_count(va) == 2);
    CHECK(brg_seg_folder_ignored_count(tr) == 0);
    CHECK_OK(brg_seg_folder_split(f, 0.4, 3, &tr2, &va2));
    int same = 1;
    for (int64_t i = 0; i < 2; i++) same &= strcmp(brg_seg_folder_image(va, i), brg_seg_folder_image(va2, i)) == 0;
    CHECK(same);
    int covered = 1;
    for (int64_t i = 0; i < 5; i++) {
        int in = 0;
        for (int64_t k = 0; k < 3; k++) in += strcmp(brg_seg_folder_image(tr, k), brg_seg_folder_image(f, i)) == 0;
        for (int64_t k = 0; k < 2; k++) in += strcmp(brg_seg_folder_image(va, k), brg_seg_folder_image(f, i)) == 0;
        covered &= in == 1;
        /* Masks travel with their images. */
        for (int64_t k = 0; k < 3; k++)
            if (strcmp(brg_seg_folder_image(tr, k), brg_seg_folder_image(f, i)) == 0)
                covered &= strcmp(brg_seg_folder_mask(tr, k), brg_seg_folder_mask(f, i)) == 0;
    }
    CHECK(covered);
    brg_seg_folder_destroy(tr);
    brg_seg_folder_destroy(va);
    brg_seg_folder_destroy(tr2);
    brg_seg_folder_destroy(va2);
    CHECK_STATUS(brg_seg_folder_split(f, 0.0, 3, &tr, &va), BRG_ERR_INVALID_ARGUMENT);
    brg_seg_folder_destroy(f);
    brg_seg_folder_destroy(NULL);

    /* Layouts: train/ with images/ and masks/; a folder without masks/. */
    mkdir_in("seg2");
    mkdir_in("seg2/train");
    mkdir_in("seg2/train/images");
    mkdir_in("seg2/train/masks");
    path_in(p, sizeof p, "seg2");
    CHECK(brg_seg_folder_detect(p) == 2);
    CHECK_STATUS(brg_seg_folder_open(p, &f), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("has no images/ and no masks/");
    path_in(p, sizeof p, "seg2/train");
    CHECK_OK(brg_seg_folder_open(p, &f));
    CHECK(f && brg_seg_folder_count(f) == 0);
    brg_seg_folder_destroy(f);
    mkdir_in("seg3");
    mkdir_in("seg3/images");
    path_in(p, sizeof p, "seg3");
    CHECK(brg_seg_folder_detect(p) == 0);
    CHECK_STATUS(brg_seg_folder_open(p, &f), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("has no masks/");
    CHECK(f == NULL);
}

/* ---- the loader with a label map per sample ---- */

static brg_status map_read(void *ctx, int64_t index, uint64_t seed, float *image, int32_t *labels)
{
    (void)ctx;
    for (int k = 0; k < 3; k++) image[k] = (float)index + (float)k / 4.0f;
    for (int k = 0; k < 6; k++) labels[k] = (int32_t)(index * 10 + k + (int64_t)(seed & 1));
    return BRG_OK;
}

static void test_loader_labels(void)
{
    brg_sample_source src = {50, 3, map_read, NULL, 6};
    int64_t order[50];
    CHECK_OK(brg_shuffle_indices(order, 50, 2));
    for (int threads = 0; threads <= 3; threads += 3) {
        brg_loader_options o = {threads, 2, NULL};
        brg_loader *l = NULL;
        CHECK_OK(brg_loader_create(&src, 8, &o, &l));
        if (!l) continue;
        CHECK(brg_loader_host_bytes(l) == (size_t)(threads ? 3 : 1) * 8 * (3 * 4 + 6 * 4));
        CHECK_OK(brg_loader_start(l, order, 50, 0, 5));
        int64_t got = 0, n = 1;
        int right = 1;
        while (n > 0) {
            const float *x;
            const int32_t *y;
            CHECK_OK(brg_loader_next(l, &x, &y, &n, NULL));
            for (int64_t s = 0; s < n; s++) {
                const int64_t idx = order[got + s];
                const uint64_t seed = brg_loader_sample_seed(5, idx);
                right &= x[s * 3] == (float)idx;
                for (int k = 0; k < 6; k++) right &= y[s * 6 + k] == (int32_t)(idx * 10 + k + (int64_t)(seed & 1));
            }
            got += n;
        }
        CHECK_MSG(right && got == 50, "threads %d: %lld samples, labels %s", threads, (long long)got,
                  right ? "right" : "wrong");
        brg_loader_destroy(l);
    }
    /* label_count 0 and 1 are one label; a negative count is refused. */
    src.label_count = 0;
    brg_loader_options o = {0, 1, NULL};
    brg_loader *l = NULL;
    CHECK_OK(brg_loader_create(&src, 4, &o, &l));
    CHECK(brg_loader_host_bytes(l) == 4 * (3 * 4 + 4));
    brg_loader_destroy(l);
    src.label_count = -1;
    CHECK_STATUS(brg_loader_create(&src, 4, &o, &l), BRG_ERR_INVALID_ARGUMENT);
}

/* A source over a real folder through the loader: every batch's labels
 * are H x W per sample, the same with 0 and 2 threads. */
static void test_loader_folder(void)
{
    mkdir_in("seg4");
    mkdir_in("seg4/images");
    mkdir_in("seg4/masks");
    char rel[2][64];
    for (int i = 0; i < 7; i++) {
        snprintf(rel[0], sizeof rel[0], "seg4/images/%02d.png", i);
        snprintf(rel[1], sizeof rel[1], "seg4/masks/%02d.png", i);
        write_pair(rel[0], rel[1], 24 + i, 20, 24 + i, 20, 0, 0);
    }
    char p[512];
    path_in(p, sizeof p, "seg4");
    brg_seg_folder *f = NULL;
    CHECK_OK(brg_seg_folder_open(p, &f));
    brg_image_transform t = brg_seg_transform_init(3, 16, 16);
    t.random = t.flip = 1;
    brg_image_source *src = NULL;
    CHECK_OK(brg_seg_source_create(f, &t, 3, 255, 1, &src));
    int32_t *first = malloc(7 * 256 * sizeof *first);
    for (int threads = 0; threads <= 2; threads += 2) {
        brg_loader_options o = {threads, 2, NULL};
        brg_loader *l = NULL;
        CHECK_OK(brg_loader_create(brg_image_source_samples(src), 3, &o, &l));
        CHECK_OK(brg_loader_start(l, NULL, 7, 0, 11));
        int64_t got = 0, n = 1;
        int same = 1;
        while (n > 0 && l) {
            const float *x;
            const int32_t *y;
            CHECK_OK(brg_loader_next(l, &x, &y, &n, NULL));
            if (n == 0) break;
            if (threads == 0) memcpy(first + got * 256, y, (size_t)n * 256 * sizeof *y);
            else same &= memcmp(first + got * 256, y, (size_t)n * 256 * sizeof *y) == 0;
            got += n;
        }
        CHECK(got == 7 && same);
        brg_loader_destroy(l);
    }
    int varied = 0;
    for (int i = 1; i < 7 * 256; i++) varied |= first[i] != first[0];
    CHECK(varied);
    free(first);
    brg_image_source_destroy(src);
    brg_seg_folder_destroy(f);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/brg-segdata-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_mask_decode();
    test_joint_alignment();
    test_nearest();
    test_seg_folder();
    test_loader_labels();
    test_loader_folder();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    TEST_EXIT();
}

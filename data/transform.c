/* An image to a model's input: resize the shorter side, crop, flip,
 * normalize (see brg_image_transform in include/brigade/images.h).
 *
 * The resize is separable resampling with a triangle (bilinear) filter
 * whose support widens by the shrink factor, the way PIL's resample and
 * torchvision's antialiased Resize work: output pixel x of a resized axis
 * covers source pixels around (x + 0.5) * scale - 0.5, weighted by
 * triangle((i + 0.5 - (x + 0.5) * scale) / max(scale, 1)) and normalized.
 * Only the crop's rows and columns are computed: the window is chosen in
 * resized coordinates first, then each output pixel is resampled from the
 * source directly, so a 500 x 375 photo cropped to 299 x 299 costs the
 * window, not the whole resized image.
 *
 * A segmentation mask goes through the same geometry (geometry_of: the
 * resized size, the window, the flip, from the same seed) and is resampled
 * by nearest neighbour, so every label is one of the mask's own values and
 * sits on the pixel it labels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "base/rng.h"
#include "brigade/images.h"

brg_image_transform brg_image_transform_init(int channels, int height, int width)
{
    static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f}, imagenet_std[3] = {0.229f, 0.224f, 0.225f};
    brg_image_transform t;
    memset(&t, 0, sizeof t);
    t.channels = channels;
    t.height = height;
    t.width = width;
    const int side = height > width ? height : width;
    t.resize = (int)lround((double)side / 0.875);
    for (int c = 0; c < 3; c++) {
        t.mean[c] = channels == 3 ? imagenet_mean[c] : 0.0f;
        t.std[c] = channels == 3 ? imagenet_std[c] : 1.0f;
    }
    return t;
}

brg_image_transform brg_seg_transform_init(int channels, int height, int width)
{
    brg_image_transform t = brg_image_transform_init(channels, height, width);
    t.resize = height > width ? height : width;
    return t;
}

/* The taps of one resized axis: for each of n outputs starting at resized
 * coordinate first, the source range [lo, lo + taps) and its weights. */
typedef struct axis {
    int n, max_taps;
    int *lo, *taps;
    float *w; /* n x max_taps */
} axis;

static void axis_free(axis *a)
{
    free(a->lo);
    free(a->taps);
    free(a->w);
}

static brg_status axis_make(axis *a, int in, int out, int first, int n)
{
    const double scale = (double)in / (double)out;
    const double fs = scale > 1.0 ? scale : 1.0; /* the filter's stretch */
    const double support = fs;                   /* a triangle of radius 1, stretched */
    memset(a, 0, sizeof *a);
    a->n = n;
    a->max_taps = (int)ceil(support) * 2 + 1;
    a->lo = malloc((size_t)n * sizeof *a->lo);
    a->taps = malloc((size_t)n * sizeof *a->taps);
    a->w = malloc((size_t)n * (size_t)a->max_taps * sizeof *a->w);
    if (!a->lo || !a->taps || !a->w) {
        axis_free(a);
        return brg_error(BRG_ERR_HOST_MEMORY, "image transform: out of host memory");
    }
    for (int k = 0; k < n; k++) {
        const double center = ((double)(first + k) + 0.5) * scale;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        if (hi - lo > a->max_taps) hi = lo + a->max_taps;
        float *w = a->w + (size_t)k * (size_t)a->max_taps;
        double sum = 0.0;
        for (int i = lo; i < hi; i++) {
            const double d = fabs(((double)i + 0.5 - center) / fs);
            w[i - lo] = (float)(d < 1.0 ? 1.0 - d : 0.0);
            sum += w[i - lo];
        }
        for (int i = lo; i < hi; i++) w[i - lo] = sum > 0.0 ? (float)(w[i - lo] / sum) : (i == lo ? 1.0f : 0.0f);
        a->lo[k] = lo;
        a->taps[k] = hi - lo;
    }
    return BRG_OK;
}

/* Where the window lies: the resized size, the window's corner in resized
 * coordinates, and the flip. Shared by the image and its mask, so both get
 * the same geometry from the same seed. */
typedef struct geometry {
    int rw, rh; /* the resized image */
    int x0, y0; /* the window's top-left corner in it */
    int flip;
} geometry;

/* Check t for a width x height x channels image (channels 0: a mask, no
 * channel check) and choose the window from seed. */
static brg_status geometry_of(int width, int height, int channels, const brg_image_transform *t, uint64_t seed,
                              geometry *g)
{
    const int C = t->channels, H = t->height, W = t->width;
    if ((channels && C != channels) || (C != 1 && C != 3) || H <= 0 || W <= 0 || t->resize < 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "image transform: a %d-channel image to %dx%dx%d (resize %d): channels must match, 1 or 3",
                         channels, C, H, W, t->resize);
    for (int c = 0; c < C; c++)
        if (!(t->std[c] > 0.0f) || !isfinite(t->mean[c]))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "image transform: channel %d has mean %g and std %g", c,
                             (double)t->mean[c], (double)t->std[c]);
    /* The resized size: the shorter side becomes resize, the longer in
     * proportion (truncated, as torchvision's Resize). */
    int rw = width, rh = height;
    if (t->resize > 0) {
        if (width <= height) {
            rw = t->resize;
            rh = (int)((int64_t)t->resize * height / width);
        } else {
            rh = t->resize;
            rw = (int)((int64_t)t->resize * width / height);
        }
    }
    if (rw < W || rh < H)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "image transform: a %dx%d image resized to %dx%d is smaller than the %dx%d crop (give a "
                         "larger --resize than %d)", width, height, rw, rh, W, H, t->resize);
    g->rw = rw;
    g->rh = rh;
    g->flip = 0;
    if (t->random) {
        const uint64_t h = brg_splitmix64(seed), v = brg_splitmix64(h);
        g->x0 = (int)(h % (uint64_t)(rw - W + 1));
        g->y0 = (int)(v % (uint64_t)(rh - H + 1));
        g->flip = t->flip && (brg_splitmix64(v) >> 63);
    } else {
        /* Halves round to even, as Python's round in torchvision's CenterCrop. */
        g->x0 = (int)rint((double)(rw - W) / 2.0);
        g->y0 = (int)rint((double)(rh - H) / 2.0);
    }
    return BRG_OK;
}

/* The window of img resampled (bilinear, antialiased), flipped and
 * normalized into out. */
static brg_status resample(const brg_image *img, const brg_image_transform *t, const geometry *g, float *out)
{
    const int C = t->channels, H = t->height, W = t->width;
    axis ax, ay;
    brg_status st = axis_make(&ax, img->width, g->rw, g->x0, W);
    if (st != BRG_OK) return st;
    if ((st = axis_make(&ay, img->height, g->rh, g->y0, H)) != BRG_OK) {
        axis_free(&ax);
        return st;
    }
    /* Rows first: each output row is a weighted sum of source rows, over
     * the source columns the window's columns read; then columns. */
    const int col_lo = ax.lo[0];
    int col_hi = col_lo;
    for (int x = 0; x < W; x++)
        if (ax.lo[x] + ax.taps[x] > col_hi) col_hi = ax.lo[x] + ax.taps[x];
    const int64_t row = (int64_t)img->width * C, span = (int64_t)(col_hi - col_lo) * C;
    float *line = malloc((size_t)(span > 0 ? span : 1) * sizeof *line);
    if (!line) {
        axis_free(&ax);
        axis_free(&ay);
        return brg_error(BRG_ERR_HOST_MEMORY, "image transform: out of host memory");
    }
    float scale[3], shift[3];
    for (int c = 0; c < C; c++) {
        scale[c] = 1.0f / t->std[c];
        shift[c] = t->mean[c];
    }
    const int64_t plane = (int64_t)H * W;
    for (int y = 0; y < H; y++) {
        const float *wy = ay.w + (size_t)y * (size_t)ay.max_taps;
        const uint8_t *src = img->pixels + (int64_t)ay.lo[y] * row + (int64_t)col_lo * C;
        for (int64_t i = 0; i < span; i++) line[i] = wy[0] * (float)src[i];
        for (int k = 1; k < ay.taps[y]; k++) {
            const uint8_t *s = src + k * row;
            for (int64_t i = 0; i < span; i++) line[i] += wy[k] * (float)s[i];
        }
        for (int x = 0; x < W; x++) {
            const float *wx = ax.w + (size_t)x * (size_t)ax.max_taps;
            const float *l = line + (int64_t)(ax.lo[x] - col_lo) * C;
            const int ox = g->flip ? W - 1 - x : x;
            for (int c = 0; c < C; c++) {
                float v = 0.0f;
                for (int k = 0; k < ax.taps[x]; k++) v += wx[k] * l[k * C + c];
                /* value / 255 first, exactly as the IDX reader scales bytes,
                 * so an unresized grey image gives the same floats. */
                out[c * plane + (int64_t)y * W + ox] = (v / 255.0f - shift[c]) * scale[c];
            }
        }
    }
    free(line);
    axis_free(&ax);
    axis_free(&ay);
    return BRG_OK;
}

/* The source pixel that resized pixel r of an axis of `out` pixels takes
 * from one of `in` pixels by nearest neighbour: the one holding its centre,
 * floor((r + 0.5) * in / out) (PIL's NEAREST, torchvision's NEAREST_EXACT),
 * in integers so that no rounding moves a label. */
static int nearest(int r, int in, int out)
{
    const int i = (int)(((2 * (int64_t)r + 1) * in) / (2 * (int64_t)out));
    return i < in ? i : in - 1;
}

/* The window of a mask by nearest neighbour, flipped as the image. */
static void resample_nearest(const brg_image *mask, const brg_image_transform *t, const geometry *g, int32_t *labels)
{
    const int H = t->height, W = t->width;
    for (int y = 0; y < H; y++) {
        const uint8_t *row = mask->pixels + (int64_t)nearest(g->y0 + y, mask->height, g->rh) * mask->width;
        int32_t *o = labels + (int64_t)y * W;
        for (int x = 0; x < W; x++) o[g->flip ? W - 1 - x : x] = row[nearest(g->x0 + x, mask->width, g->rw)];
    }
}

brg_status brg_image_transform_apply(const brg_image *img, const brg_image_transform *t, uint64_t seed, float *out)
{
    if (!img || !img->pixels || !t || !out)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_image_transform_apply: NULL argument");
    geometry g;
    const brg_status st = geometry_of(img->width, img->height, img->channels, t, seed, &g);
    return st == BRG_OK ? resample(img, t, &g, out) : st;
}

brg_status brg_image_transform_apply_mask(const brg_image *img, const brg_image *mask, const brg_image_transform *t,
                                          uint64_t seed, float *out, int32_t *labels)
{
    if (!img || !img->pixels || !mask || !mask->pixels || !t || !out || !labels)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_image_transform_apply_mask: NULL argument");
    if (mask->channels != 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "image transform: a mask has 1 channel, not %d", mask->channels);
    if (mask->width != img->width || mask->height != img->height)
        return brg_error(BRG_ERR_FORMAT, "the mask is %dx%d and the image %dx%d; a mask needs its image's size",
                         mask->width, mask->height, img->width, img->height);
    geometry g;
    brg_status st = geometry_of(img->width, img->height, img->channels, t, seed, &g);
    if (st == BRG_OK) st = resample(img, t, &g, out);
    if (st == BRG_OK) resample_nearest(mask, t, &g, labels);
    return st;
}

/* JPEG and PNG files to pixels and back (see include/brigade/images.h):
 * libjpeg-turbo's TurboJPEG API and libspng do the coding; this file picks
 * the format, the scale and the conversion to the model's channels. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <spng.h>
#include <turbojpeg.h>

#include "base/internal.h"
#include "brigade/images.h"

static const char *name_of(const char *name) { return name ? name : "image"; }

void brg_image_free(brg_image *image)
{
    if (!image) return;
    free(image->pixels);
    memset(image, 0, sizeof *image);
}

/* ITU-R 601 luma in 16-bit fixed point (the weights sum to 65536, so a grey
 * pixel stays exactly itself). */
static uint8_t luma(unsigned r, unsigned g, unsigned b)
{
    return (uint8_t)((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
}

/* n pixels of `from` interleaved channels (3: RGB, 4: RGBA or inverted
 * CMYK) to `to` channels (1 or 3), in place (to <= from). */
static void convert(uint8_t *p, int64_t n, int from, int to, int cmyk)
{
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *s = p + i * from;
        unsigned r = s[0], g = s[1], b = s[2];
        if (cmyk) { /* Adobe's inverted CMYK: each of R, G, B is C' K' / 255 */
            const unsigned k = s[3];
            r = (r * k + 127) / 255;
            g = (g * k + 127) / 255;
            b = (b * k + 127) / 255;
        }
        uint8_t *d = p + i * to;
        if (to == 1) {
            d[0] = luma(r, g, b);
        } else {
            d[0] = (uint8_t)r;
            d[1] = (uint8_t)g;
            d[2] = (uint8_t)b;
        }
    }
}

static brg_status check_size(const char *name, int64_t width, int64_t height)
{
    if (width <= 0 || height <= 0)
        return brg_error(BRG_ERR_FORMAT, "%s: the image is %lld x %lld pixels", name, (long long)width,
                         (long long)height);
    if (width * height > BRG_IMAGE_MAX_PIXELS)
        return brg_error(BRG_ERR_FORMAT, "%s: the image is %lld x %lld pixels, more than the %lld brigade reads",
                         name, (long long)width, (long long)height, (long long)BRG_IMAGE_MAX_PIXELS);
    return BRG_OK;
}

/* The smallest of TurboJPEG's scaling factors (at most 1) that keeps the
 * shorter side at least min_side. */
static tjscalingfactor jpeg_scale(int width, int height, int min_side)
{
    tjscalingfactor best = {1, 1};
    int n = 0;
    const tjscalingfactor *f = min_side > 0 ? tjGetScalingFactors(&n) : NULL;
    for (int i = 0; f && i < n; i++) {
        if (f[i].num > f[i].denom) continue;
        const int w = TJSCALED(width, f[i]), h = TJSCALED(height, f[i]);
        const int side = w < h ? w : h;
        if (side >= min_side && (int64_t)f[i].num * best.denom < (int64_t)best.num * f[i].denom) best = f[i];
    }
    return best;
}

static brg_status decode_jpeg(const uint8_t *bytes, size_t size, int channels, int min_side, const char *name,
                              brg_image *out)
{
    if (size > ULONG_MAX) return brg_error(BRG_ERR_FORMAT, "%s: the JPEG file is too large", name);
    tjhandle tj = tjInitDecompress();
    if (!tj) return brg_error(BRG_ERR_HOST_MEMORY, "%s: TurboJPEG cannot start: %s", name, tjGetErrorStr2(NULL));
    brg_status st = BRG_OK;
    int width = 0, height = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(tj, bytes, (unsigned long)size, &width, &height, &subsamp, &colorspace) != 0) {
        st = brg_error(BRG_ERR_FORMAT, "%s: not a readable JPEG: %s", name, tjGetErrorStr2(tj));
        goto done;
    }
    if ((st = check_size(name, width, height)) != BRG_OK) goto done;
    const tjscalingfactor scale = jpeg_scale(width, height, min_side);
    const int w = TJSCALED(width, scale), h = TJSCALED(height, scale);
    const int cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
    const int format = cmyk ? TJPF_CMYK : channels == 1 ? TJPF_GRAY : TJPF_RGB;
    const int decoded = tjPixelSize[format];
    out->pixels = malloc((size_t)w * (size_t)h * (size_t)decoded);
    if (!out->pixels) {
        st = brg_error(BRG_ERR_HOST_MEMORY, "%s: out of host memory for %d x %d pixels", name, w, h);
        goto done;
    }
    /* Any warning (a truncated file is one) stops the decoder: a half grey
     * image must not pass for a sample. But for bytes between the last
     * scan and the end marker (some cameras' padding; PIL and torchvision
     * read such files): the image is whole by then, so it is decoded
     * again to the end. */
    if (tjDecompress2(tj, bytes, (unsigned long)size, out->pixels, w, 0, h, format, TJFLAG_STOPONWARNING) != 0 &&
        !(strstr(tjGetErrorStr2(tj), "extraneous bytes before marker 0xd9") &&
          (tjDecompress2(tj, bytes, (unsigned long)size, out->pixels, w, 0, h, format, 0) == 0 ||
           tjGetErrorCode(tj) == TJERR_WARNING))) {
        st = brg_error(BRG_ERR_FORMAT, "%s: corrupt or truncated JPEG: %s", name, tjGetErrorStr2(tj));
        goto done;
    }
    if (cmyk) convert(out->pixels, (int64_t)w * h, 4, channels, 1);
    out->width = w;
    out->height = h;
    out->channels = channels;
done:
    tjDestroy(tj);
    if (st != BRG_OK) brg_image_free(out);
    return st;
}

/* A libspng context on bytes, its header read and its size checked; on
 * failure *ctx is NULL. */
static brg_status open_png(const uint8_t *bytes, size_t size, const char *name, spng_ctx **ctx,
                           struct spng_ihdr *ihdr)
{
    *ctx = spng_ctx_new(0);
    if (!*ctx) return brg_error(BRG_ERR_HOST_MEMORY, "%s: libspng cannot start", name);
    int err = spng_set_png_buffer(*ctx, bytes, size);
    /* Ancillary chunks (text, profiles) need no more than a few MiB. */
    if (!err) err = spng_set_chunk_limits(*ctx, 1u << 24, 1u << 26);
    if (!err) err = spng_get_ihdr(*ctx, ihdr);
    brg_status st = err ? brg_error(BRG_ERR_FORMAT, "%s: not a readable PNG: %s", name, spng_strerror(err))
                        : check_size(name, ihdr->width, ihdr->height);
    if (st != BRG_OK) {
        spng_ctx_free(*ctx);
        *ctx = NULL;
    }
    return st;
}

/* A PNG of at most this many pixels (2048 x 2048) always decodes whole, so
 * ordinary images give exactly the pixels PIL gives; a larger one may be
 * reduced (png_factor). */
#define PNG_REDUCE_ABOVE (INT64_C(1) << 22)
/* Sums of k x k samples of 255 fit 32 bits up to k = 4096. */
#define PNG_MAX_FACTOR 4096

/* The integer factor a PNG decodes reduced by: the largest that keeps the
 * shorter side at least min_side (as jpeg_scale), but 1 when min_side is 0
 * or the image has at most PNG_REDUCE_ABOVE pixels. */
static int png_factor(int64_t width, int64_t height, int min_side)
{
    if (min_side <= 0 || width * height <= PNG_REDUCE_ABOVE) return 1;
    const int64_t k = (width < height ? width : height) / min_side;
    return k < 1 ? 1 : k > PNG_MAX_FACTOR ? PNG_MAX_FACTOR : (int)k;
}

/* Reduced row y of a width x height image whose k x k boxes (fewer pixels
 * at the right and bottom edges) were summed into sum: each box's mean,
 * rounded, into dst. */
static void put_box_means(const uint32_t *sum, uint8_t *dst, size_t y, size_t width, size_t height, size_t k,
                          int channels)
{
    const size_t w = (width + k - 1) / k, rows = height - y * k < k ? height - y * k : k;
    for (size_t x = 0; x < w; x++) {
        const size_t cols = width - x * k < k ? width - x * k : k;
        const uint32_t n = (uint32_t)(cols * rows);
        for (int c = 0; c < channels; c++) {
            const uint32_t v = sum[x * (size_t)channels + (size_t)c];
            dst[x * (size_t)channels + (size_t)c] = (uint8_t)((v + n / 2) / n);
        }
    }
}

/* The PNG opened in ctx, reduced by k >= 2: each k x k box of pixels
 * averaged into one, what a JPEG's DCT scaling does approximately. Rows
 * stream out of libspng one at a time, so the peak is a row and the output
 * instead of the whole image (a 16000 x 16000 PNG resized to 256 holds
 * 64 KiB of row and 1/62^2 of the image, not 1 GiB). An interlaced PNG
 * comes a pass at a time, each pass touching rows all over the image, so
 * its sums are kept for the whole reduced image (4 bytes a sample: four
 * times the output); a plain PNG's for one reduced row. */
static brg_status decode_png_reduced(spng_ctx *ctx, const struct spng_ihdr *ihdr, int channels, int k,
                                     const char *name, brg_image *out)
{
    /* Adam7: the first column and the column step of each pass. */
    static const uint8_t pass_x0[7] = {0, 4, 0, 2, 0, 1, 0}, pass_dx[7] = {8, 8, 4, 4, 2, 2, 1};
    const size_t W = ihdr->width, H = ihdr->height, K = (size_t)k, C = (size_t)channels;
    const size_t w = (W + K - 1) / K, h = (H + K - 1) / K;
    const int interlaced = ihdr->interlace_method != 0;
    uint8_t *row = malloc(W * 4);
    uint32_t *sum = calloc((interlaced ? h : 1) * w * C, sizeof *sum);
    out->pixels = malloc(w * h * C);
    brg_status st = BRG_OK;
    if (!row || !sum || !out->pixels) {
        st = brg_error(BRG_ERR_HOST_MEMORY, "%s: out of host memory for %zu x %zu pixels (reduced by %d)", name, w, h,
                       k);
        goto done;
    }
    struct spng_row_info ri;
    int err = spng_decode_image(ctx, NULL, 0, SPNG_FMT_RGBA8, SPNG_DECODE_TRNS | SPNG_DECODE_PROGRESSIVE);
    while (!err && !(err = spng_get_row_info(ctx, &ri))) {
        /* SPNG_EOI comes with the last row, decoded. */
        err = spng_decode_row(ctx, row, W * 4);
        if (err && err != SPNG_EOI) break;
        const size_t y = ri.row_num, x0 = interlaced ? pass_x0[ri.pass] : 0, dx = interlaced ? pass_dx[ri.pass] : 1;
        /* The whole row converts, the pixels of other passes (stale) too:
         * in place, pixel x's `channels` bytes then start at x * channels. */
        convert(row, (int64_t)W, 4, channels, 0);
        uint32_t *s = sum + (interlaced ? y / K : 0) * w * C;
        for (size_t x = x0; x < W; x += dx)
            for (size_t c = 0; c < C; c++) s[x / K * C + c] += row[x * C + c];
        if (!interlaced && ((y + 1) % K == 0 || y + 1 == H)) {
            put_box_means(sum, out->pixels + y / K * w * C, y / K, W, H, K, channels);
            memset(sum, 0, w * C * sizeof *sum);
        }
    }
    if (err != SPNG_EOI) {
        st = brg_error(BRG_ERR_FORMAT, "%s: corrupt or truncated PNG: %s", name, spng_strerror(err));
        goto done;
    }
    if (interlaced)
        for (size_t y = 0; y < h; y++) put_box_means(sum + y * w * C, out->pixels + y * w * C, y, W, H, K, channels);
    out->width = (int)w;
    out->height = (int)h;
    out->channels = channels;
done:
    free(row);
    free(sum);
    return st;
}

static brg_status decode_png(const uint8_t *bytes, size_t size, int channels, int min_side, const char *name,
                             brg_image *out)
{
    spng_ctx *ctx;
    struct spng_ihdr ihdr;
    size_t len = 0;
    int err;
    brg_status st = open_png(bytes, size, name, &ctx, &ihdr);
    if (st != BRG_OK) return st;
    const int k = png_factor(ihdr.width, ihdr.height, min_side);
    if (k > 1) {
        st = decode_png_reduced(ctx, &ihdr, channels, k, name, out);
        goto done;
    }
    if ((err = spng_decoded_image_size(ctx, SPNG_FMT_RGBA8, &len)) != 0) {
        st = brg_error(BRG_ERR_FORMAT, "%s: not a readable PNG: %s", name, spng_strerror(err));
        goto done;
    }
    out->pixels = malloc(len);
    if (!out->pixels) {
        st = brg_error(BRG_ERR_HOST_MEMORY, "%s: out of host memory for %u x %u pixels", name, ihdr.width, ihdr.height);
        goto done;
    }
    if ((err = spng_decode_image(ctx, out->pixels, len, SPNG_FMT_RGBA8, SPNG_DECODE_TRNS)) != 0) {
        st = brg_error(BRG_ERR_FORMAT, "%s: corrupt or truncated PNG: %s", name, spng_strerror(err));
        goto done;
    }
    convert(out->pixels, (int64_t)ihdr.width * ihdr.height, 4, channels, 0);
    out->width = (int)ihdr.width;
    out->height = (int)ihdr.height;
    out->channels = channels;
done:
    spng_ctx_free(ctx);
    if (st != BRG_OK) brg_image_free(out);
    return st;
}

brg_status brg_image_decode(const void *bytes, size_t size, int channels, int min_side, const char *name,
                            brg_image *out)
{
    static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    name = name_of(name);
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_image_decode: out is NULL");
    memset(out, 0, sizeof *out);
    if (channels != 1 && channels != 3)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: images decode to 1 or 3 channels, not %d", name, channels);
    const uint8_t *b = bytes;
    if (!b || size == 0) return brg_error(BRG_ERR_FORMAT, "%s: the file is empty", name);
    if (size >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return decode_jpeg(b, size, channels, min_side, name, out);
    if (size >= 8 && memcmp(b, png_magic, 8) == 0) return decode_png(b, size, channels, min_side, name, out);
    char start[16] = "";
    for (size_t i = 0, at = 0; i < size && i < 4; i++)
        at += (size_t)snprintf(start + at, sizeof start - at, "%s%02x", i ? " " : "", b[i]);
    return brg_error(BRG_ERR_FORMAT, "%s: neither a JPEG nor a PNG image (it starts with %s%s)", name, start,
                     size < 4 ? ", all of its bytes" : "");
}

static const char *png_color_name(int color_type)
{
    switch (color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE: return "grey";
    case SPNG_COLOR_TYPE_TRUECOLOR: return "RGB";
    case SPNG_COLOR_TYPE_INDEXED: return "palette";
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: return "grey+alpha";
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: return "RGBA";
    default: return "unknown";
    }
}

/* A label map: a grey or palette PNG of 1 to 8 bits, each pixel's stored
 * value (the grey level or the palette index, unscaled) one byte. */
static brg_status decode_mask_png(const uint8_t *bytes, size_t size, const char *name, brg_image *out)
{
    spng_ctx *ctx;
    struct spng_ihdr ihdr;
    size_t len = 0;
    int err;
    brg_status st = open_png(bytes, size, name, &ctx, &ihdr);
    if (st != BRG_OK) return st;
    if ((ihdr.color_type != SPNG_COLOR_TYPE_GRAYSCALE && ihdr.color_type != SPNG_COLOR_TYPE_INDEXED) ||
        ihdr.bit_depth > 8) {
        st = brg_error(BRG_ERR_FORMAT,
                       "%s: the PNG is %s, %d bits a sample; a mask is a grey or palette PNG of at most 8 bits "
                       "whose values are class numbers", name, png_color_name(ihdr.color_type), ihdr.bit_depth);
        goto done;
    }
    /* SPNG_FMT_PNG: the stored values, no conversion; rows of fewer than 8
     * bits a pixel come packed (most significant bits first). */
    if ((err = spng_decoded_image_size(ctx, SPNG_FMT_PNG, &len)) != 0) {
        st = brg_error(BRG_ERR_FORMAT, "%s: not a readable PNG: %s", name, spng_strerror(err));
        goto done;
    }
    const size_t w = ihdr.width, h = ihdr.height, depth = ihdr.bit_depth;
    const size_t row = (w * depth + 7) / 8;
    uint8_t *packed = depth < 8 ? malloc(len) : NULL;
    out->pixels = malloc(w * h);
    if (!out->pixels || (depth < 8 && !packed) || len != row * h) {
        free(packed);
        st = len != row * h ? brg_error(BRG_ERR_FORMAT, "%s: unexpected decoded size", name)
                            : brg_error(BRG_ERR_HOST_MEMORY, "%s: out of host memory for %zu x %zu pixels", name, w, h);
        goto done;
    }
    if ((err = spng_decode_image(ctx, depth < 8 ? packed : out->pixels, len, SPNG_FMT_PNG, 0)) != 0) {
        free(packed);
        st = brg_error(BRG_ERR_FORMAT, "%s: corrupt or truncated PNG: %s", name, spng_strerror(err));
        goto done;
    }
    if (depth < 8) {
        const unsigned per = 8 / (unsigned)depth, max = (1u << depth) - 1;
        for (size_t y = 0; y < h; y++)
            for (size_t x = 0; x < w; x++) {
                const unsigned shift = 8 - (unsigned)depth * (unsigned)(x % per + 1);
                out->pixels[y * w + x] = (uint8_t)((packed[y * row + x / per] >> shift) & max);
            }
        free(packed);
    }
    out->width = (int)w;
    out->height = (int)h;
    out->channels = 1;
done:
    spng_ctx_free(ctx);
    if (st != BRG_OK) brg_image_free(out);
    return st;
}

brg_status brg_mask_decode(const void *bytes, size_t size, const char *name, brg_image *out)
{
    static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    name = name_of(name);
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_mask_decode: out is NULL");
    memset(out, 0, sizeof *out);
    const uint8_t *b = bytes;
    if (!b || size == 0) return brg_error(BRG_ERR_FORMAT, "%s: the file is empty", name);
    if (size >= 8 && memcmp(b, png_magic, 8) == 0) return decode_mask_png(b, size, name, out);
    if (size >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return brg_error(BRG_ERR_FORMAT, "%s: a JPEG; a mask must be a PNG (JPEG's lossy coding changes labels)",
                         name);
    return brg_error(BRG_ERR_FORMAT, "%s: not a PNG mask (it starts with %02x %02x %02x %02x)", name, b[0],
                     size > 1 ? b[1] : 0, size > 2 ? b[2] : 0, size > 3 ? b[3] : 0);
}

/* The whole file in a malloc'd buffer; files over 1 GiB are refused, and
 * so is anything but a regular file (brg_open_regular: a FIFO named x.png
 * would wait for a writer forever). */
static brg_status read_whole(const char *path, uint8_t **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    FILE *f;
    BRG_CHECK(brg_open_regular(path, "image", &f));
    brg_status st = BRG_OK;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        st = brg_error(BRG_ERR_IO, "cannot read image %s: %s", path, strerror(errno));
    } else if (sb.st_size > (1L << 30)) {
        st = brg_error(BRG_ERR_FORMAT, "%s: %lld bytes, more than the 1 GiB an image file may have", path,
                       (long long)sb.st_size);
    } else if (sb.st_size > 0) {
        const size_t n = (size_t)sb.st_size;
        *data = malloc(n);
        if (!*data) st = brg_error(BRG_ERR_HOST_MEMORY, "%s: out of host memory for %zu bytes", path, n);
        else if (fread(*data, 1, n, f) != n)
            st = brg_error(BRG_ERR_IO, "cannot read image %s: %s", path,
                           ferror(f) ? strerror(errno) : "it got shorter");
        else *size = n;
    }
    fclose(f);
    if (st != BRG_OK) {
        free(*data);
        *data = NULL;
    }
    return st;
}

brg_status brg_image_read(const char *path, int channels, int min_side, brg_image *out)
{
    if (!out || !path) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_image_read: NULL argument");
    memset(out, 0, sizeof *out);
    uint8_t *data;
    size_t size;
    brg_status st = read_whole(path, &data, &size);
    if (st == BRG_OK) st = brg_image_decode(data, size, channels, min_side, path, out);
    free(data);
    return st;
}

brg_status brg_mask_read(const char *path, brg_image *out)
{
    if (!out || !path) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_mask_read: NULL argument");
    memset(out, 0, sizeof *out);
    uint8_t *data;
    size_t size;
    brg_status st = read_whole(path, &data, &size);
    if (st == BRG_OK) st = brg_mask_decode(data, size, path, out);
    free(data);
    return st;
}

brg_status brg_image_write_png(const char *path, const uint8_t *pixels, int width, int height, int channels)
{
    static const uint8_t color_type[5] = {0, SPNG_COLOR_TYPE_GRAYSCALE, 0, SPNG_COLOR_TYPE_TRUECOLOR,
                                          SPNG_COLOR_TYPE_TRUECOLOR_ALPHA};
    if (!path || !pixels || width <= 0 || height <= 0 || (channels != 1 && channels != 3 && channels != 4))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_image_write_png: %d x %d pixels of %d channels", width,
                         height, channels);
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    if (!ctx) return brg_error(BRG_ERR_HOST_MEMORY, "%s: libspng cannot start", path);
    struct spng_ihdr ihdr = {(uint32_t)width, (uint32_t)height, 8, color_type[channels], 0, 0, 0};
    brg_status st = BRG_OK;
    int err = spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
    if (!err) err = spng_set_ihdr(ctx, &ihdr);
    if (!err)
        err = spng_encode_image(ctx, pixels, (size_t)width * (size_t)height * (size_t)channels, SPNG_FMT_PNG,
                                SPNG_ENCODE_FINALIZE);
    size_t len = 0;
    void *png = err ? NULL : spng_get_png_buffer(ctx, &len, &err);
    if (err || !png) {
        st = brg_error(BRG_ERR_FORMAT, "%s: cannot encode the PNG: %s", path, spng_strerror(err));
    } else {
        st = brg_write_file(path, "image", png, len);
    }
    free(png);
    spng_ctx_free(ctx);
    return st;
}

brg_status brg_image_write_jpeg(const char *path, const uint8_t *pixels, int width, int height, int channels,
                                int quality)
{
    if (!path || !pixels || width <= 0 || height <= 0 || (channels != 1 && channels != 3) || quality < 1 ||
        quality > 100)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_image_write_jpeg: %d x %d pixels of %d channels, quality %d",
                         width, height, channels, quality);
    tjhandle tj = tjInitCompress();
    if (!tj) return brg_error(BRG_ERR_HOST_MEMORY, "%s: TurboJPEG cannot start: %s", path, tjGetErrorStr2(NULL));
    unsigned char *jpeg = NULL;
    unsigned long len = 0;
    brg_status st = BRG_OK;
    if (tjCompress2(tj, pixels, width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &jpeg, &len,
                    channels == 1 ? TJSAMP_GRAY : TJSAMP_420, quality, 0) != 0) {
        st = brg_error(BRG_ERR_FORMAT, "%s: cannot encode the JPEG: %s", path, tjGetErrorStr2(tj));
    } else {
        st = brg_write_file(path, "image", jpeg, len);
    }
    tjFree(jpeg);
    tjDestroy(tj);
    return st;
}

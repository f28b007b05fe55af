/* brigade data: look at an image folder or a segmentation folder (info),
 * write Fashion-MNIST as class folders of PNG files or a synthetic
 * segmentation set of shapes (export), and measure how fast the loader
 * makes training batches from a folder (bench). */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "train.h"
#include "progress.h"

static void usage_data(FILE *out)
{
    fprintf(out,
            "usage: brigade data info DIR\n"
            "       brigade data export fashion-mnist OUT [--format png] [--data-dir DIR] [--limit N]\n"
            "       brigade data export shapes OUT [--limit N] [--size S] [--classes K] [--seed S]\n"
            "       brigade data bench DIR --input CxHxW [--resize S] [--threads N] [--batch B]\n"
            "                          [--images N] [--no-flip]\n"
            "\n"
            "info     the classes of an image folder (DIR/train and DIR/val, or DIR's own\n"
            "         class folders) with their image counts, the files left out, and a note\n"
            "         on a layout that train needs --val-split for or refuses;\n"
            "         for a segmentation folder (images/ and masks/, at DIR or in DIR/train and\n"
            "         DIR/val): its pairs, their sizes, the pixels of each mask value, and the\n"
            "         files left out\n"
            "export   fashion-mnist: write Fashion-MNIST's IDX files as\n"
            "         OUT/train/CLASS/NNNNN.png and OUT/val/CLASS/NNNNN.png (grey PNG, lossless:\n"
            "         the same pixels), classes named 0-tshirt-top ... 9-ankle-boot so that they\n"
            "         sort in label order; --limit N writes the first N images of each split\n"
            "         shapes: a synthetic segmentation set for tests and demos, OUT/train and\n"
            "         OUT/val with images/NNNNN.png (RGB: 1 to 4 filled shapes, each of its own\n"
            "         random colour, on coloured noise) and masks/NNNNN.png (grey: the class of\n"
            "         each pixel, 0 for the background, 1 rectangles, 2 disks, 3 triangles,\n"
            "         4 crosses, 5 rings; the 1-pixel outline of each shape is 255, the default\n"
            "         --ignore-label). --limit N training images (default 1000) and N/5 for\n"
            "         validation, S x S pixels (--size, default 64), K classes with the\n"
            "         background (--classes 2..6, default 3), the same files for the same --seed;\n"
            "         OUT is a new or empty folder (one holding files is refused)\n"
            "bench    decode and transform N images (default 1024) of DIR (or DIR/train) into\n"
            "         training batches with the loader's threads (default: all cores) and\n"
            "         print images per second (with their masks, for a segmentation folder)\n"
            "         and the bad files it skipped\n"
            "\n"
            "Exit status: 0 done; 1 the work failed (a folder cannot be read or written);\n"
            "2 the command line is wrong.\n"
            "\n"
            "examples:\n"
            "  brigade data export fashion-mnist fmnist-png\n"
            "  brigade data export shapes shapes --limit 200 --size 32\n"
            "  brigade data info shapes\n"
            "  brigade data info fmnist-png\n"
            "  brigade train fmnist-cnn --data fmnist-png --resize 28 --no-flip --devices 1x512MiB\n"
            "  brigade data bench photos --input 3x299x299 --threads 2\n");
}

/* The classes of class folder dir with their counts, and the files left
 * out; -1 when printed (the folder then in *keep, when keep is given), or
 * the exit code. */
static int print_folder(const char *label, const char *dir, brg_image_folder **keep)
{
    brg_image_folder *f = NULL;
    const brg_status st = brg_image_folder_open(dir, &f);
    if (st != BRG_OK) {
        brg_cli_fail("data info", st);
        return BRG_EXIT_FAILURE;
    }
    const int64_t images = brg_image_folder_count(f);
    const int classes = brg_image_folder_classes(f);
    printf("%s %s: %lld image%s in %d class%s\n", label, dir, (long long)images, images == 1 ? "" : "s", classes,
           classes == 1 ? "" : "es");
    /* The counts line up after the longest name as it is shown. */
    char name[1100];
    int width = 0, w;
    for (int k = 0; k < brg_image_folder_classes(f); k++) {
        brg_cli_shown(brg_image_folder_class_name(f, k), name, sizeof name, &w);
        if (w > width) width = w;
    }
    for (int k = 0; k < brg_image_folder_classes(f); k++) {
        brg_cli_shown(brg_image_folder_class_name(f, k), name, sizeof name, &w);
        printf("  %5d  %s%*s %8lld%s\n", k, name, width - w, "", (long long)brg_image_folder_class_count(f, k),
               brg_image_folder_class_count(f, k) ? "" : "  (empty)");
    }
    const int64_t ignored = brg_image_folder_ignored_count(f);
    for (int64_t i = 0; i < ignored && i < 10; i++) {
        const char *why = NULL, *path = brg_image_folder_ignored(f, i, &why);
        char shown_path[BRG_CLI_SHOWN_PATH_MAX];
        printf("  left out: %s: %s\n", brg_cli_shown(path, shown_path, sizeof shown_path, NULL), why);
    }
    if (ignored > 10) printf("  ... and %lld more files left out\n", (long long)(ignored - 10));
    if (keep) *keep = f;
    else brg_image_folder_destroy(f);
    return -1;
}

/* ---- segmentation folders ---- */

/* The pairs of a segmentation folder: counts, mask sizes, the pixels of
 * each mask value (every mask is read), the files left out. */
static int print_seg_folder(const char *label, const char *dir)
{
    brg_seg_folder *f = NULL;
    const brg_status st = brg_seg_folder_open(dir, &f);
    if (st != BRG_OK) {
        brg_cli_fail("data info", st);
        return BRG_EXIT_FAILURE;
    }
    const int64_t n = brg_seg_folder_count(f), ignored = brg_seg_folder_ignored_count(f);
    int64_t pixels[256] = {0}, bad = 0, total = 0;
    int min_w = 0, min_h = 0, max_w = 0, max_h = 0;
    char *bad_why[10] = {NULL}; /* the first ten, shown below the heading they belong under */
    brg_count_progress prog = brg_count_progress_start();
    char doing[64];
    int label_len = (int)strlen(label); /* without the spaces that line up the headings */
    while (label_len > 0 && label[label_len - 1] == ' ') label_len--;
    snprintf(doing, sizeof doing, "reading %.*s", label_len, label);
    for (int64_t i = 0; i < n; i++) {
        brg_count_progress_show(&prog, doing, i, n, "masks");
        brg_image m;
        if (brg_mask_read(brg_seg_folder_mask(f, i), &m) != BRG_OK) {
            char msg[8500 * 4 + 8];
            if (bad < 10) bad_why[bad] = strdup(brg_cli_shown(brg_last_error(), msg, sizeof msg, NULL));
            bad++;
            continue;
        }
        if (!min_w || m.width * m.height < min_w * min_h) min_w = m.width, min_h = m.height;
        if (m.width * m.height > max_w * max_h) max_w = m.width, max_h = m.height;
        const int64_t np = (int64_t)m.width * m.height;
        for (int64_t k = 0; k < np; k++) pixels[m.pixels[k]]++;
        total += np;
        brg_image_free(&m);
    }
    brg_count_progress_show(&prog, doing, n, n, "masks");
    brg_count_progress_clear(&prog);
    printf("%s %s: %lld images with masks", label, dir, (long long)n);
    if (n > bad) {
        if (min_w == max_w && min_h == max_h) printf(", %dx%d", min_w, min_h);
        else printf(", %dx%d to %dx%d pixels", min_w, min_h, max_w, max_h);
    }
    if (bad) printf(", %lld bad mask%s", (long long)bad, bad == 1 ? "" : "s");
    if (ignored) printf(", %lld file%s left out", (long long)ignored, ignored == 1 ? "" : "s");
    printf("\n");
    for (int64_t i = 0; i < bad && i < 10; i++) {
        printf("  bad mask: %s\n", bad_why[i] ? bad_why[i] : "(out of memory for the message)");
        free(bad_why[i]);
    }
    if (bad > 10) printf("  ... and %lld more bad masks\n", (long long)(bad - 10));
    if (total) {
        printf("  %5s  %12s  %6s\n", "value", "pixels", "share");
        for (int v = 0; v < 256; v++)
            if (pixels[v])
                printf("  %5d  %12lld  %5.1f%%%s\n", v, (long long)pixels[v], 100.0 * (double)pixels[v] / (double)total,
                       v == BRG_SEG_IGNORE_LABEL ? "  (the default ignore label)" : "");
    }
    for (int64_t i = 0; i < ignored && i < 10; i++) {
        const char *why = NULL, *path = brg_seg_folder_ignored(f, i, &why);
        char shown_path[BRG_CLI_SHOWN_PATH_MAX];
        printf("  left out: %s: %s\n", brg_cli_shown(path, shown_path, sizeof shown_path, NULL), why);
    }
    if (ignored > 10) printf("  ... and %lld more files left out\n", (long long)(ignored - 10));
    brg_seg_folder_destroy(f);
    return -1;
}

static int seg_info(const char *dir, int layout)
{
    if (layout == 1) {
        printf("segmentation folder %s: images/ and masks/ (train and eval split them with --val-split)\n", dir);
        return print_seg_folder("all  ", dir);
    }
    char train[4200], val[4200];
    snprintf(train, sizeof train, "%s/train", dir);
    snprintf(val, sizeof val, "%s/val", dir);
    const int has_val = brg_seg_folder_detect(val) == 1;
    printf("segmentation folder %s: train/%s\n", dir,
           has_val ? " and val/" : " without val/ (train and eval hold out a part with --val-split)");
    int rc = print_seg_folder("train", train);
    if (rc < 0 && has_val) rc = print_seg_folder("val  ", val);
    return rc;
}

static int data_info(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
            usage_data(stdout);
            return BRG_EXIT_OK;
        }
        fprintf(stderr, "brigade data info: give one folder (see 'brigade data --help')\n");
        return BRG_EXIT_USAGE;
    }
    const char *dir = argv[1];
    const int layout = brg_seg_folder_detect(dir);
    if (layout) {
        const int rc = seg_info(dir, layout);
        return rc < 0 ? brg_cli_finish_stdout("data info", BRG_EXIT_OK) : rc;
    }
    char train[4200], val[4200];
    struct stat sb;
    const int split = brg_train_data_split_dirs(dir, train, val, sizeof train);
    const char *lone = split ? NULL : brg_train_data_lone_split(dir);
    const int has_val = split && stat(val, &sb) == 0 && S_ISDIR(sb.st_mode);
    brg_image_folder *tf = NULL, *vf = NULL;
    int rc = print_folder(split ? "train  " : "classes", split ? train : dir, &tf);
    if (rc < 0 && has_val) rc = print_folder("val    ", val, &vf);
    /* What train and eval will make of the layout, as they would say it. */
    if (rc < 0 && lone)
        printf("note: %s has a %s/ folder but no train/, so its class folders include '%s'; train and eval refuse "
               "it: add train/ (and name the held-out part val/), or give %s/%s with --val-split F\n",
               dir, lone, lone, dir, lone);
    else if (rc < 0 && !split)
        printf("note: %s holds the class folders itself (no train/ and val/): train and eval hold out a part with "
               "--val-split F\n", dir);
    else if (rc < 0 && !has_val)
        printf("note: %s has a train/ folder but no val/ beside it: train and eval hold out a part of train/ with "
               "--val-split F\n", dir);
    for (int k = 0; rc < 0 && vf && (k < brg_image_folder_classes(tf) || k < brg_image_folder_classes(vf)); k++) {
        const char *x = brg_image_folder_class_name(tf, k), *y = brg_image_folder_class_name(vf, k);
        if (x && y && strcmp(x, y) == 0) continue;
        char xs[1100], ys[1100];
        printf("note: %s has other classes than %s: class %d is '%s' there and '%s' in train/; train and eval refuse "
               "it (both need the same class folders)\n",
               val, train, k, y ? brg_cli_shown(y, ys, sizeof ys, NULL) : "(none)",
               x ? brg_cli_shown(x, xs, sizeof xs, NULL) : "(none)");
        break;
    }
    brg_image_folder_destroy(tf);
    brg_image_folder_destroy(vf);
    return rc < 0 ? brg_cli_finish_stdout("data info", BRG_EXIT_OK) : rc;
}

/* Fashion-MNIST's classes as folder names that sort in label order. */
static const char *const fmnist_classes[BRG_FASHION_MNIST_CLASSES] = {
    "0-tshirt-top", "1-trouser", "2-pullover", "3-dress", "4-coat",
    "5-sandal",     "6-shirt",   "7-sneaker",  "8-bag",   "9-ankle-boot"};

static int make_dir(const char *path)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST) return 1;
    fprintf(stderr, "brigade data export: cannot create the folder %s: %s\n", path, strerror(errno));
    return 0;
}

/* The first thing in dir (its path into first) that is not a folder holding
 * nothing but such folders, looked for depth folders down (deeper counts
 * as something); 0 when there is none. */
static int holds_something(const char *dir, int depth, char *first, size_t size)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    const struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        found = depth == 0 || lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) ||
                holds_something(path, depth - 1, first, size);
        if (found && !first[0]) snprintf(first, size, "%s", path);
    }
    closedir(d);
    return found;
}

/* An export goes into a new or empty folder: into one that holds files it
 * would mix two sets (or overwrite one). Empty folders do not count, such
 * as a failed export leaves (its half-written image removed). 1 when out
 * will do. */
static int fresh_folder(const char *out)
{
    struct stat sb;
    if (stat(out, &sb) != 0) return 1; /* made later; an error there is named then */
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "brigade data export: %s is not a folder; give a new or empty folder\n", out);
        return 0;
    }
    char first[4200] = "";
    if (!holds_something(out, 4, first, sizeof first)) return 1;
    fprintf(stderr, "brigade data export: %s holds files already (%s among them), which the export would mix with "
                    "its own or overwrite: give a new or empty folder\n", out, first);
    return 0;
}

static int export_split(const char *out, const char *split, const brg_dataset *ds, int64_t limit)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", out, split);
    if (!make_dir(path)) return BRG_EXIT_FAILURE;
    for (int k = 0; k < BRG_FASHION_MNIST_CLASSES; k++) {
        snprintf(path, sizeof path, "%s/%s/%s", out, split, fmnist_classes[k]);
        if (!make_dir(path)) return BRG_EXIT_FAILURE;
    }
    const int64_t n = limit && limit < ds->count ? limit : ds->count, side = ds->height * ds->width;
    uint8_t *px = malloc((size_t)side);
    if (!px) return brg_cli_fail("data export", BRG_ERR_HOST_MEMORY);
    brg_count_progress prog = brg_count_progress_start();
    char doing[64];
    snprintf(doing, sizeof doing, "writing %s", split);
    for (int64_t i = 0; i < n; i++) {
        brg_count_progress_show(&prog, doing, i, n, "images");
        /* The IDX reader made v / 255 of each byte: back to the byte exactly. */
        for (int64_t j = 0; j < side; j++) px[j] = (uint8_t)(ds->images[i * side + j] * 255.0f + 0.5f);
        snprintf(path, sizeof path, "%s/%s/%s/%05lld.png", out, split, fmnist_classes[ds->labels[i]], (long long)i);
        const brg_status st = brg_image_write_png(path, px, ds->width, ds->height, 1);
        if (st != BRG_OK) {
            brg_count_progress_clear(&prog);
            free(px);
            brg_cli_fail("data export", st);
            return BRG_EXIT_FAILURE;
        }
    }
    free(px);
    brg_count_progress_show(&prog, doing, n, n, "images");
    brg_count_progress_clear(&prog);
    printf("wrote %lld image%s to %s/%s\n", (long long)n, n == 1 ? "" : "s", out, split);
    return -1;
}

/* ---- export shapes: a synthetic segmentation set ---- */

/* A splitmix64 stream. */
typedef struct shape_rng {
    uint64_t state;
} shape_rng;

static uint64_t shape_next(shape_rng *r)
{
    r->state += 0x9e3779b97f4a7c15ULL;
    return brg_cli_mix64(r->state);
}

/* Uniform in [lo, hi]. */
static int shape_int(shape_rng *r, int lo, int hi) { return lo + (int)(shape_next(r) % (uint64_t)(hi - lo + 1)); }

/* Whether pixel (x, y)'s centre is inside shape `kind` (1 rectangle, 2
 * disk, 3 triangle, 4 cross, 5 ring) in the box [x0, x0 + w) x [y0, y0 + h). */
static int inside(int kind, double x, double y, int x0, int y0, int w, int h)
{
    const double u = (x - x0) / w, v = (y - y0) / h; /* 0..1 across the box */
    if (u < 0 || u >= 1 || v < 0 || v >= 1) return 0;
    const double du = u - 0.5, dv = v - 0.5, r2 = du * du + dv * dv;
    switch (kind) {
    case 1: return 1;
    case 2: return r2 <= 0.25;
    case 3: return fabs(du) <= v / 2; /* apex at the top centre, base at the bottom */
    case 4: return fabs(du) <= 1.0 / 6 || fabs(dv) <= 1.0 / 6;
    default: return r2 <= 0.25 && r2 >= 0.25 * 0.55 * 0.55;
    }
}

/* Image and mask `index` of a split: 1 to 4 shapes of random classes
 * 1..classes-1, each in its own colour, drawn in order on noise around a
 * random colour; the outline of each visible shape (its pixels with a
 * 4-neighbour of another shape or the background) becomes 255 in the mask. */
static void make_shapes(uint64_t seed, int split, int64_t index, int size, int classes, uint8_t *rgb, uint8_t *mask,
                        uint8_t *owner)
{
    shape_rng r = {brg_cli_mix64(seed ^ brg_cli_mix64(((uint64_t)split << 40) ^ (uint64_t)index))};
    int base[3];
    for (int c = 0; c < 3; c++) base[c] = shape_int(&r, 40, 215);
    const int64_t n = (int64_t)size * size;
    for (int64_t i = 0; i < n; i++) {
        for (int c = 0; c < 3; c++) {
            const int v = base[c] + shape_int(&r, -40, 40);
            rgb[i * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
        mask[i] = 0;
        owner[i] = 0;
    }
    const int shapes = shape_int(&r, 1, 4);
    for (int s = 1; s <= shapes; s++) {
        const int kind = shape_int(&r, 1, classes - 1);
        const int lo = size / 6 > 3 ? size / 6 : 3, hi = size / 2 > 4 ? size / 2 : 4;
        const int w = shape_int(&r, lo, hi);
        const int h = kind == 2 || kind == 5 ? w : shape_int(&r, lo, hi); /* disks and rings stay round */
        const int x0 = shape_int(&r, -w / 4, size - w + w / 4), y0 = shape_int(&r, -h / 4, size - h + h / 4);
        uint8_t colour[3];
        for (int c = 0; c < 3; c++) colour[c] = (uint8_t)shape_int(&r, 0, 255);
        for (int y = 0; y < size; y++)
            for (int x = 0; x < size; x++) {
                if (!inside(kind, x + 0.5, y + 0.5, x0, y0, w, h)) continue;
                const int64_t i = (int64_t)y * size + x;
                memcpy(rgb + i * 3, colour, 3);
                mask[i] = (uint8_t)kind;
                owner[i] = (uint8_t)s;
            }
    }
    /* Outlines, from the owners (a shape beside another of its class still
     * gets its outline). */
    for (int y = 0; y < size; y++)
        for (int x = 0; x < size; x++) {
            const int64_t i = (int64_t)y * size + x;
            if (!owner[i]) continue;
            const int edge = (x > 0 && owner[i - 1] != owner[i]) || (x + 1 < size && owner[i + 1] != owner[i]) ||
                             (y > 0 && owner[i - size] != owner[i]) || (y + 1 < size && owner[i + size] != owner[i]);
            if (edge) mask[i] = BRG_SEG_IGNORE_LABEL;
        }
}

static int export_shapes_split(const char *out, const char *split, int split_no, int64_t count, int size, int classes,
                               uint64_t seed)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", out, split);
    if (!make_dir(path)) return BRG_EXIT_FAILURE;
    snprintf(path, sizeof path, "%s/%s/images", out, split);
    if (!make_dir(path)) return BRG_EXIT_FAILURE;
    snprintf(path, sizeof path, "%s/%s/masks", out, split);
    if (!make_dir(path)) return BRG_EXIT_FAILURE;
    const size_t n = (size_t)size * (size_t)size;
    uint8_t *rgb = malloc(n * 3), *mask = malloc(n), *owner = malloc(n);
    brg_status st = rgb && mask && owner ? BRG_OK : BRG_ERR_HOST_MEMORY;
    brg_count_progress prog = brg_count_progress_start();
    char doing[64];
    snprintf(doing, sizeof doing, "writing %s", split);
    for (int64_t i = 0; st == BRG_OK && i < count; i++) {
        brg_count_progress_show(&prog, doing, i, count, "images");
        make_shapes(seed, split_no, i, size, classes, rgb, mask, owner);
        snprintf(path, sizeof path, "%s/%s/images/%05lld.png", out, split, (long long)i);
        st = brg_image_write_png(path, rgb, size, size, 3);
        snprintf(path, sizeof path, "%s/%s/masks/%05lld.png", out, split, (long long)i);
        if (st == BRG_OK) st = brg_image_write_png(path, mask, size, size, 1);
    }
    free(rgb);
    free(mask);
    free(owner);
    if (st == BRG_OK) brg_count_progress_show(&prog, doing, count, count, "images");
    brg_count_progress_clear(&prog);
    if (st != BRG_OK) {
        brg_cli_fail("data export", st);
        return BRG_EXIT_FAILURE;
    }
    printf("wrote %lld image%s and mask%s to %s/%s\n", (long long)count, count == 1 ? "" : "s", count == 1 ? "" : "s",
           out, split);
    return -1;
}

static int export_shapes(const char *out, int64_t limit, int64_t size, int64_t classes, uint64_t seed)
{
    const int64_t train = limit ? limit : 1000, val = train / 5 > 0 ? train / 5 : 1;
    if (!make_dir(out)) return BRG_EXIT_FAILURE;
    int rc = export_shapes_split(out, "train", 0, train, (int)size, (int)classes, seed);
    if (rc < 0) rc = export_shapes_split(out, "val", 1, val, (int)size, (int)classes, seed);
    if (rc < 0)
        printf("classes: 0 background, 1 rectangle, 2 disk%s%s%s; 255 marks the shapes' outlines (the default "
               "--ignore-label)\n", classes > 3 ? ", 3 triangle" : "", classes > 4 ? ", 4 cross" : "",
               classes > 5 ? ", 5 ring" : "");
    return rc;
}

static int data_export(int argc, char **argv)
{
    static const struct option opts[] = {{"format", required_argument, NULL, 'f'},
                                         {"data-dir", required_argument, NULL, 'd'},
                                         {"limit", required_argument, NULL, 'l'},
                                         {"size", required_argument, NULL, 's'},
                                         {"classes", required_argument, NULL, 'k'},
                                         {"seed", required_argument, NULL, 'S'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *data_dir = NULL, *shape_opt = NULL, *fmnist_opt = NULL;
    int64_t limit = 0, size = 64, classes = 3, seed = 1;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage_data(stdout); return BRG_EXIT_OK;
        case 'f':
            if (strcmp(optarg, "png") != 0) {
                fprintf(stderr, "brigade data export: --format '%s': only png is written (lossless)\n", optarg);
                return BRG_EXIT_USAGE;
            }
            fmnist_opt = "--format";
            break;
        case 'd': data_dir = optarg; fmnist_opt = "--data-dir"; break;
        case 'l':
            if (!brg_cli_parse_int("data export", "--limit", optarg, 1, INT64_MAX, &limit)) return BRG_EXIT_USAGE;
            break;
        case 's':
            if (!brg_cli_parse_int("data export", "--size", optarg, 8, 4096, &size)) return BRG_EXIT_USAGE;
            shape_opt = "--size";
            break;
        case 'k':
            if (!brg_cli_parse_int("data export", "--classes", optarg, 2, 6, &classes)) return BRG_EXIT_USAGE;
            shape_opt = "--classes";
            break;
        case 'S':
            if (!brg_cli_parse_int("data export", "--seed", optarg, 0, INT64_MAX, &seed)) return BRG_EXIT_USAGE;
            shape_opt = "--seed";
            break;
        default: return brg_cli_bad_option("data export", c, argv);
        }
    }
    const int shapes = argc - optind == 2 && strcmp(argv[optind], "shapes") == 0;
    if (argc - optind != 2 || (!shapes && strcmp(argv[optind], "fashion-mnist") != 0)) {
        fprintf(stderr, "brigade data export: expected 'fashion-mnist OUT' or 'shapes OUT' (see 'brigade data "
                        "--help')\n");
        return BRG_EXIT_USAGE;
    }
    if ((shapes && fmnist_opt) || (!shapes && shape_opt)) {
        fprintf(stderr, "brigade data export: %s applies to %s\n", shapes ? fmnist_opt : shape_opt,
                shapes ? "fashion-mnist" : "shapes");
        return BRG_EXIT_USAGE;
    }
    /* Without trailing slashes, so that the paths it names read right. */
    char out_buf[4096];
    snprintf(out_buf, sizeof out_buf, "%s", argv[optind + 1]);
    for (size_t n = strlen(out_buf); n > 1 && out_buf[n - 1] == '/'; n--) out_buf[n - 1] = '\0';
    const char *out = out_buf;
    if (!fresh_folder(out)) return BRG_EXIT_USAGE;
    if (shapes) {
        const int rc = export_shapes(out, limit, size, classes, (uint64_t)seed);
        return rc < 0 ? brg_cli_finish_stdout("data export", BRG_EXIT_OK) : rc;
    }
    brg_dataset *train = NULL, *test = NULL;
    brg_status st = brg_fashion_mnist_load(data_dir, BRG_SPLIT_TRAIN, &train);
    if (st == BRG_OK) st = brg_fashion_mnist_load(data_dir, BRG_SPLIT_TEST, &test);
    int rc = -1;
    if (st != BRG_OK) {
        brg_cli_fail("data export: Fashion-MNIST", st);
        rc = BRG_EXIT_FAILURE;
    }
    if (rc < 0 && !make_dir(out)) rc = BRG_EXIT_FAILURE;
    if (rc < 0) rc = export_split(out, "train", train, limit);
    if (rc < 0) rc = export_split(out, "val", test, limit);
    brg_dataset_destroy(train);
    brg_dataset_destroy(test);
    return rc < 0 ? brg_cli_finish_stdout("data export", BRG_EXIT_OK) : rc;
}

static int data_bench(int argc, char **argv)
{
    static const struct option opts[] = {{"input", required_argument, NULL, 'i'},
                                         {"resize", required_argument, NULL, 'r'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"batch", required_argument, NULL, 'b'},
                                         {"images", required_argument, NULL, 'n'},
                                         {"no-flip", no_argument, NULL, 'f'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    brg_zoo_options zoo;
    memset(&zoo, 0, sizeof zoo);
    int have_input = 0, no_flip = 0;
    const char *input = NULL;
    int64_t resize = 0, batch = 32, images = 1024;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t threads = cores > 0 ? cores : 1;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage_data(stdout); return BRG_EXIT_OK;
        case 'i':
            if (brg_cli_parse_input("data bench", optarg, &zoo) != BRG_OK) return BRG_EXIT_USAGE;
            input = optarg;
            have_input = 1;
            break;
        case 'r':
            if (!brg_cli_parse_int("data bench", "--resize", optarg, 1, 65535, &resize)) return BRG_EXIT_USAGE;
            break;
        case 't':
            if (!brg_cli_parse_int("data bench", "--threads", optarg, 0, 256, &threads)) return BRG_EXIT_USAGE;
            break;
        case 'b':
            if (!brg_cli_parse_int("data bench", "--batch", optarg, 1, 4096, &batch)) return BRG_EXIT_USAGE;
            break;
        case 'n':
            /* 2^24 (hours of decoding): its order is allocated up front, 8 bytes an image */
            if (!brg_cli_parse_int("data bench", "--images", optarg, 1, INT64_C(1) << 24, &images))
                return BRG_EXIT_USAGE;
            break;
        case 'f': no_flip = 1; break;
        default: return brg_cli_bad_option("data bench", c, argv);
        }
    }
    if (argc - optind != 1 || !have_input) {
        fprintf(stderr, "brigade data bench: expected a folder and --input CxHxW (see 'brigade data --help')\n");
        return BRG_EXIT_USAGE;
    }
    /* Wrong numbers are the command line's fault (exit 2), found before
     * the folder is read, as train finds them. */
    if (zoo.channels != 1 && zoo.channels != 3) {
        fprintf(stderr, "brigade data bench: --input '%s': images decode to 1 channel (grey) or 3 (RGB); give "
                        "--input 1x%lldx%lld or 3x%lldx%lld\n", input, (long long)zoo.height, (long long)zoo.width,
                (long long)zoo.height, (long long)zoo.width);
        return BRG_EXIT_USAGE;
    }
    const int64_t side = zoo.height > zoo.width ? zoo.height : zoo.width;
    if (resize && resize < side) {
        fprintf(stderr, "brigade data bench: --resize %lld is smaller than the %lldx%lld input: the crop would not "
                        "fit; give at least %lld\n", (long long)resize, (long long)zoo.height, (long long)zoo.width,
                (long long)side);
        return BRG_EXIT_USAGE;
    }
    char buf[4200], val[4200];
    const char *dir = brg_train_data_split_dirs(argv[optind], buf, val, sizeof buf) ? buf : argv[optind];
    /* A segmentation folder: its pairs, every mask value taken as valid. */
    const int seg = brg_seg_folder_detect(argv[optind]) != 0;
    if (seg) dir = brg_seg_folder_detect(argv[optind]) == 1 ? argv[optind] : buf;
    brg_image_transform t = seg ? brg_seg_transform_init((int)zoo.channels, (int)zoo.height, (int)zoo.width)
                                : brg_image_transform_init((int)zoo.channels, (int)zoo.height, (int)zoo.width);
    if (resize) t.resize = (int)resize;
    t.random = 1;
    t.flip = !no_flip;
    brg_image_folder *f = NULL;
    brg_seg_folder *sf = NULL;
    brg_image_source *src = NULL;
    brg_loader *l = NULL;
    int64_t *order = NULL;
    brg_status st = seg ? brg_seg_folder_open(dir, &sf) : brg_image_folder_open(dir, &f);
    const int64_t count = seg ? brg_seg_folder_count(sf) : brg_image_folder_count(f);
    if (st == BRG_OK && count == 0) {
        fprintf(stderr, "brigade data bench: %s holds no %s\n", dir,
                seg ? "image with a mask" : ".jpg, .jpeg or .png images in its class folders");
        brg_image_folder_destroy(f);
        brg_seg_folder_destroy(sf);
        return BRG_EXIT_FAILURE;
    }
    if (st == BRG_OK)
        st = seg ? brg_seg_source_create(sf, &t, 256, BRG_SEG_IGNORE_LABEL, 1, &src)
                 : brg_image_source_create(f, &t, 1, &src);
    brg_loader_options o = {(int)threads, 4, NULL};
    if (st == BRG_OK) st = brg_loader_create(brg_image_source_samples(src), batch, &o, &l);
    if (st == BRG_OK && !(order = malloc((size_t)images * sizeof *order))) st = BRG_ERR_HOST_MEMORY;
    int rc = BRG_EXIT_OK;
    if (st == BRG_OK) {
        /* Sample order[i] cycles over the folder in a shuffled order. */
        int64_t *perm = malloc((size_t)count * sizeof *perm);
        st = perm ? brg_shuffle_indices(perm, count, 1) : BRG_ERR_HOST_MEMORY;
        for (int64_t i = 0; st == BRG_OK && i < images; i++) order[i] = perm[i % count];
        free(perm);
    }
    double t0 = brg_progress_now(), t1 = t0;
    int64_t done = 0;
    if (st == BRG_OK) st = brg_loader_start(l, order, images, 0, 1);
    for (int64_t n = 1; st == BRG_OK && n > 0;) {
        const float *x;
        const int32_t *y;
        st = brg_loader_next(l, &x, &y, &n, NULL);
        done += n;
    }
    t1 = brg_progress_now();
    if (st != BRG_OK) {
        brg_cli_fail("data bench", st);
        rc = BRG_EXIT_FAILURE;
    } else {
        printf("data bench: %lld image%s%s of %s to %dx%dx%d (resize %d, random crops%s) with %lld thread%s: %.2f s, "
               "%.1f images/s\n", (long long)done, done == 1 ? "" : "s",
               seg ? (done == 1 ? " and its mask" : " and masks") : "", dir, t.channels, t.height, t.width, t.resize,
               t.flip ? ", flips" : "", (long long)threads, threads == 1 ? "" : "s", t1 - t0,
               t1 > t0 ? (double)done / (t1 - t0) : 0.0);
        const int64_t n_bad = brg_image_source_bad_count(src);
        if (n_bad) printf("data bench: %lld bad image%s skipped\n", (long long)n_bad, n_bad == 1 ? "" : "s");
        /* Which, as train names them: a bench is how a folder is tried. */
        char why[8500], msg[8500 * 4 + 8];
        for (int64_t k = 0; k < n_bad && k < 10; k++)
            if (brg_image_source_bad(src, k, NULL, 0, why, sizeof why) == BRG_OK)
                printf("  bad: %s\n", brg_cli_shown(why, msg, sizeof msg, NULL));
        if (n_bad > 10) printf("  ... and %lld more bad images\n", (long long)(n_bad - 10));
    }
    free(order);
    brg_loader_destroy(l);
    brg_image_source_destroy(src);
    brg_image_folder_destroy(f);
    brg_seg_folder_destroy(sf);
    return rc == BRG_EXIT_OK ? brg_cli_finish_stdout("data bench", rc) : rc;
}

int brg_cmd_data(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } subcommands[] = {{"info", data_info}, {"export", data_export}, {"bench", data_bench}};
    if (argc < 2) {
        fprintf(stderr, "brigade data: missing subcommand (info, export or bench)\n\n");
        usage_data(stderr);
        return BRG_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage_data(stdout);
        return BRG_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0) return subcommands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "brigade data: unknown subcommand '%s'\n\n", argv[1]);
    usage_data(stderr);
    return BRG_EXIT_USAGE;
}

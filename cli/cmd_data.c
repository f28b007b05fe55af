/* brigade data: look at an image folder (info), write Fashion-MNIST as
 * class folders of PNG files (export), and measure how fast the loader
 * makes training batches from a folder (bench). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "progress.h"

static void usage_data(FILE *out)
{
    fprintf(out,
            "usage: brigade data info DIR\n"
            "       brigade data export fashion-mnist OUT [--format png] [--data-dir DIR] [--limit N]\n"
            "       brigade data bench DIR --input CxHxW [--resize S] [--threads N] [--batch B]\n"
            "                          [--images N] [--no-flip]\n"
            "\n"
            "info     the classes of an image folder (DIR/train and DIR/val, or DIR's own\n"
            "         class folders) with their image counts, and the files that are not images\n"
            "export   write Fashion-MNIST's IDX files as OUT/train/CLASS/NNNNN.png and\n"
            "         OUT/val/CLASS/NNNNN.png (grey PNG, lossless: the same pixels), classes\n"
            "         named 0-tshirt-top ... 9-ankle-boot so that they sort in label order;\n"
            "         --limit N writes the first N images of each split\n"
            "bench    decode and transform N images (default 1024) of DIR (or DIR/train) into\n"
            "         training batches with the loader's threads (default: all cores) and\n"
            "         print images per second\n"
            "\n"
            "Exit status: 0 done; 1 the work failed (a folder cannot be read or written);\n"
            "2 the command line is wrong.\n"
            "\n"
            "examples:\n"
            "  brigade data export fashion-mnist fmnist-png\n"
            "  brigade data info fmnist-png\n"
            "  brigade train fmnist-cnn --data fmnist-png --resize 28 --no-flip --devices 1x512MiB\n"
            "  brigade data bench photos --input 3x299x299 --threads 2\n");
}

/* DIR/train when it is a folder, else DIR. */
static const char *train_dir_of(const char *dir, char *buf, size_t size)
{
    struct stat sb;
    snprintf(buf, size, "%s/train", dir);
    return stat(buf, &sb) == 0 && S_ISDIR(sb.st_mode) ? buf : dir;
}

static int print_folder(const char *label, const char *dir)
{
    brg_image_folder *f = NULL;
    const brg_status st = brg_image_folder_open(dir, &f);
    if (st != BRG_OK) {
        brg_cli_fail("data info", st);
        return BRG_EXIT_FAILURE;
    }
    printf("%s %s: %lld images in %d classes\n", label, dir, (long long)brg_image_folder_count(f),
           brg_image_folder_classes(f));
    for (int k = 0; k < brg_image_folder_classes(f); k++)
        printf("  %5d  %-32s %8lld%s\n", k, brg_image_folder_class_name(f, k),
               (long long)brg_image_folder_class_count(f, k), brg_image_folder_class_count(f, k) ? "" : "  (empty)");
    const int64_t ignored = brg_image_folder_ignored_count(f);
    for (int64_t i = 0; i < ignored && i < 10; i++) printf("  not an image: %s\n", brg_image_folder_ignored(f, i));
    if (ignored > 10) printf("  ... and %lld more files that are not images\n", (long long)(ignored - 10));
    brg_image_folder_destroy(f);
    return -1;
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
    char train[4200], val[4200];
    struct stat sb;
    snprintf(val, sizeof val, "%s/val", dir);
    const char *t = train_dir_of(dir, train, sizeof train);
    int rc = print_folder(t == dir ? "classes" : "train  ", t);
    if (rc < 0 && t != dir && stat(val, &sb) == 0 && S_ISDIR(sb.st_mode)) rc = print_folder("val    ", val);
    return rc < 0 ? BRG_EXIT_OK : rc;
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
    for (int64_t i = 0; i < n; i++) {
        /* The IDX reader made v / 255 of each byte: back to the byte exactly. */
        for (int64_t j = 0; j < side; j++) px[j] = (uint8_t)(ds->images[i * side + j] * 255.0f + 0.5f);
        snprintf(path, sizeof path, "%s/%s/%s/%05lld.png", out, split, fmnist_classes[ds->labels[i]], (long long)i);
        const brg_status st = brg_image_write_png(path, px, ds->width, ds->height, 1);
        if (st != BRG_OK) {
            free(px);
            brg_cli_fail("data export", st);
            return BRG_EXIT_FAILURE;
        }
    }
    free(px);
    printf("wrote %lld images to %s/%s\n", (long long)n, out, split);
    return -1;
}

static int data_export(int argc, char **argv)
{
    static const struct option opts[] = {{"format", required_argument, NULL, 'f'},
                                         {"data-dir", required_argument, NULL, 'd'},
                                         {"limit", required_argument, NULL, 'l'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *data_dir = NULL;
    int64_t limit = 0;
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
            break;
        case 'd': data_dir = optarg; break;
        case 'l':
            if (!brg_cli_parse_int("data export", "--limit", optarg, 1, INT64_MAX, &limit)) return BRG_EXIT_USAGE;
            break;
        default: return brg_cli_bad_option("data export", c, argv);
        }
    }
    if (argc - optind != 2 || strcmp(argv[optind], "fashion-mnist") != 0) {
        fprintf(stderr, "brigade data export: expected 'fashion-mnist OUT' (see 'brigade data --help')\n");
        return BRG_EXIT_USAGE;
    }
    const char *out = argv[optind + 1];
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
            if (brg_cli_parse_input(optarg, &zoo) != BRG_OK) {
                fprintf(stderr, "brigade data bench: --input: %s\n", brg_last_error());
                return BRG_EXIT_USAGE;
            }
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
            if (!brg_cli_parse_int("data bench", "--images", optarg, 1, INT64_C(1) << 31, &images))
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
    char buf[4200];
    const char *dir = train_dir_of(argv[optind], buf, sizeof buf);
    brg_image_transform t = brg_image_transform_init((int)zoo.channels, (int)zoo.height, (int)zoo.width);
    if (resize) t.resize = (int)resize;
    t.random = 1;
    t.flip = !no_flip;
    brg_image_folder *f = NULL;
    brg_image_source *src = NULL;
    brg_loader *l = NULL;
    int64_t *order = NULL;
    brg_status st = brg_image_folder_open(dir, &f);
    if (st == BRG_OK && brg_image_folder_count(f) == 0) {
        fprintf(stderr, "brigade data bench: %s holds no .jpg, .jpeg or .png images in its class folders\n", dir);
        brg_image_folder_destroy(f);
        return BRG_EXIT_FAILURE;
    }
    if (st == BRG_OK) st = brg_image_source_create(f, &t, 1, &src);
    brg_loader_options o = {(int)threads, 4};
    if (st == BRG_OK) st = brg_loader_create(brg_image_source_samples(src), batch, &o, &l);
    if (st == BRG_OK && !(order = malloc((size_t)images * sizeof *order))) st = BRG_ERR_HOST_MEMORY;
    int rc = BRG_EXIT_OK;
    if (st == BRG_OK) {
        /* Sample order[i] cycles over the folder in a shuffled order. */
        const int64_t count = brg_image_folder_count(f);
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
        printf("data bench: %lld images of %s to %dx%dx%d (resize %d, random crops%s) with %lld thread%s: %.2f s, "
               "%.1f images/s\n", (long long)done, dir, t.channels, t.height, t.width, t.resize,
               t.flip ? ", flips" : "", (long long)threads, threads == 1 ? "" : "s", t1 - t0,
               t1 > t0 ? (double)done / (t1 - t0) : 0.0);
        if (brg_image_source_bad_count(src))
            printf("data bench: %lld bad images skipped\n", (long long)brg_image_source_bad_count(src));
    }
    free(order);
    brg_loader_destroy(l);
    brg_image_source_destroy(src);
    brg_image_folder_destroy(f);
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

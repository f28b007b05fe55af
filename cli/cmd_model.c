/* brigade model: list the zoo, summarize a model layer by layer, export a
 * model to a JSON file, import one from ONNX.
 *
 * The summary is a table in the shape people know from Keras and torchinfo:
 * one section per block, one row per layer (name, type with its key
 * parameters, output shape, parameter count, activation bytes per sample),
 * a subtotal per block, then the totals and what crosses each block
 * boundary, which is what a pipeline partition has to send between stages. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* ---- usage ---- */

static void usage_model(FILE *out)
{
    fprintf(out,
            "usage: brigade model list\n"
            "       brigade model summary MODEL [--input CxHxW] [--classes N] [--width-mult F] [--batch B]\n"
            "       brigade model export MODEL [--input CxHxW] [--classes N] [--width-mult F] -o FILE.json\n"
            "       brigade model export MODEL [zoo options] --weights W.safetensors [--seed S | --from DIR]\n"
            "       brigade model import FILE.onnx|KERAS.json|KERAS.keras [-o FILE.json] [--weights W.safetensors]\n"
            "       brigade model profile MODEL --batch U [--share N | --device cuda:G] [-o PROFILE.json]\n"
            "\n"
            "Inspect the built-in models and model files; bring models in from ONNX and Keras.\n"
            "\n"
            "subcommands:\n"
            "  list      the zoo: standard input, classes, parameters, description\n"
            "  summary   layers, output shapes, parameters and activation memory per block,\n"
            "            and the tensors that cross each block boundary\n"
            "  export    write a model as a JSON model file, to edit or to train from\n"
            "  import    translate an ONNX model (PyTorch's and others' exports) or a Keras\n"
            "            model (model.to_json(), a .keras archive) into brigade's blocks\n"
            "            and layers\n"
            "  profile   measure each layer's forward and backward time on this machine's\n"
            "            CPU, for the planner's --profile\n"
            "\n"
            "MODEL is a zoo name (see 'brigade model list'), a JSON model file, an ONNX file,\n"
            "a Keras model's JSON or a .keras archive.\n"
            "\n"
            "examples:\n"
            "  brigade model list\n"
            "  brigade model summary inception-v3\n"
            "  brigade model summary resnet50 --input 3x512x512 --width-mult 2 --batch 32\n"
            "  brigade model export unet --classes 2 -o unet.json\n"
            "  brigade model import resnet50.onnx -o resnet50.json --weights resnet50.safetensors\n"
            "  brigade model profile resnet18 --input 3x64x64 --batch 32 -o resnet18.profile.json\n"
            "\n"
            "'brigade model SUBCOMMAND --help' describes a subcommand.\n");
}

static void usage_list(FILE *out)
{
    fprintf(out,
            "usage: brigade model list [--help]\n"
            "\n"
            "List the zoo models with their standard input (CxHxW), number of classes,\n"
            "trainable parameters at the standard settings, and a one-line description.\n"
            "Every zoo model also takes --input, --classes and --width-mult.\n");
}

/* The options shared by summary and export. */
#define ZOO_OPTIONS_HELP                                                                           \
    "  --input CxHxW      input size, e.g. 3x512x512 (or HxW, keeping the channels)\n"              \
    "  --classes N        number of classes of the final layer\n"                                  \
    "  --width-mult F     multiply every convolution's and hidden layer's channels by F\n"         \
    "                     (F > 0; 2 gives a model about four times as large)\n"          \
    "  --cuts fine        also cut blocks where one tensor alone crosses inside them\n"

static void usage_summary(FILE *out)
{
    fprintf(out,
            "usage: brigade model summary MODEL [--input CxHxW] [--classes N] [--width-mult F] [--batch B]\n"
            "\n"
            "Print a model block by block: for each layer its type and key parameters\n"
            "(kernel/stride), output shape (C x H x W), parameters and activation bytes per\n"
            "sample (its output tensor in float32); a subtotal per block; the total,\n"
            "trainable and non-trainable (BatchNorm running statistics) parameters; the\n"
            "memory of parameters and activations; and the tensors that cross each block\n"
            "boundary (the main path and long skips), which is what a pipeline stage sends\n"
            "to the next.\n"
            "\n"
            "MODEL is a zoo name (see 'brigade model list'), a JSON model file, or an ONNX\n"
            "or Keras file (as 'brigade model import' reads it).\n"
            "\n"
            "options:\n" ZOO_OPTIONS_HELP
            "  --batch B          also give the activation memory of a batch of B samples\n"
            "  -h, --help         show this help\n"
            "\n"
            "--input, --classes and --width-mult apply to zoo models; a model file is taken as it is.\n"
            "\n"
            "examples:\n"
            "  brigade model summary inception-v3\n"
            "  brigade model summary resnet152 --input 3x448x448 --batch 16\n"
            "  brigade model summary vgg16 --width-mult 2 --classes 10\n"
            "  brigade model summary my-model.json\n");
}

static void usage_export(FILE *out)
{
    fprintf(out,
            "usage: brigade model export MODEL [--input CxHxW] [--classes N] [--width-mult F] -o FILE.json\n"
            "       brigade model export MODEL [zoo options] --weights W.safetensors [--seed S | --from DIR]\n"
            "\n"
            "Write a model as a JSON model file (docs/model-format.md) to edit it by hand\n"
            "or keep it; every command that takes MODEL reads FILE.json back. With\n"
            "--weights, write its weights as a safetensors file (docs/checkpoints.md):\n"
            "the initial ones of a seed, or those of the newest checkpoint in DIR;\n"
            "'brigade train --init-weights' starts from such a file.\n"
            "\n"
            "MODEL is a zoo name (see 'brigade model list'), a JSON model file, or an ONNX\n"
            "or Keras file (as 'brigade model import' reads it). The files written must be\n"
            "apart from MODEL, from each other and from checkpoint folders.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE  where to write; '-' writes to standard output (and what\n"
            "                     else was written to standard error)\n"
            "  --weights W        write the weights to W (safetensors), with or without -o\n"
            "                     (an ONNX or .keras file's own: 'brigade model import --weights')\n"
            "  --seed S           the initial weights of seed S (default 1; as 'brigade\n"
            "                     train --seed S' starts from)\n"
            "  --from DIR         the weights of the newest complete checkpoint in DIR\n"
            "                     (from 'brigade train --checkpoint DIR')\n" ZOO_OPTIONS_HELP
            "  -h, --help         show this help\n"
            "\n"
            "--input, --classes and --width-mult apply to zoo models; a model file is taken as it is.\n"
            "\n"
            "examples:\n"
            "  brigade model export resnet50 -o resnet50.json\n"
            "  brigade model export inception-v3 --input 3x512x512 --width-mult 1.5 -o big.json\n"
            "  brigade model export fmnist-cnn -o - | less\n"
            "  brigade model export fmnist-cnn --weights init.safetensors --seed 7\n"
            "  brigade model export fmnist-cnn --weights trained.safetensors --from ckpt\n");
}

static void usage_import(FILE *out)
{
    fprintf(out,
            "usage: brigade model import FILE.onnx|KERAS.json|KERAS.keras [-o FILE.json] [--weights W.safetensors]\n"
            "\n"
            "Translate an ONNX model, or a Keras model saved with model.to_json() or as a\n"
            ".keras archive (Keras 2 or 3), into a brigade model (docs/import.md): its\n"
            "nodes or layers become brigade's (a Pad folded into the next Conv or pool, a\n"
            "MatMul and its Add into one linear layer, a final Softmax dropped; Keras's\n"
            "channels-last made channels-first), cut into blocks where one\n"
            "tensor alone crosses (for Inception and ResNet, the module boundaries), so\n"
            "that the partitioner can place them. Prints what was imported and any\n"
            "change made on the way (on standard error, 'brigade CMD: note: FILE: ...',\n"
            "when another command takes the file as MODEL). Anything brigade cannot compute\n"
            "exactly is refused, naming the node, its op and the attribute, and for an op\n"
            "it does not import, what to do instead: nothing is half imported.\n"
            "\n"
            "Every command that takes MODEL also takes the file directly (without its\n"
            "weights); -o keeps the translation as a JSON model file to read or edit.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE  write the model as a JSON model file; '-' writes to\n"
            "                     standard output (and the report to standard error)\n"
            "  --weights W        write the file's weights to W (safetensors, brigade's\n"
            "                     names and layouts) for 'brigade train --init-weights W'\n"
            "                     (ONNX files and .keras archives; a Keras JSON holds none)\n"
            "  -h, --help         show this help\n"
            "\n"
            "Exit status: 0 imported; 1 a file of these kinds that cannot be imported\n"
            "(malformed, or a node brigade cannot compute) or written; 2 the command line\n"
            "is wrong, or FILE is of another kind (an image, a PyTorch or HDF5 file, a\n"
            "brigade model file): the message says what it is and how to bring it in.\n"
            "\n"
            "examples:\n"
            "  brigade model import resnet50.onnx\n"
            "  brigade model import resnet50.onnx -o resnet50.json --weights resnet50.safetensors\n"
            "  brigade model import keras_inception_v3.json -o inception.json\n"
            "  brigade plan resnet50.onnx --devices 7x12GiB --batch 256\n");
}

static void usage_profile(FILE *out)
{
    fprintf(out,
            "usage: brigade model profile MODEL --batch U [zoo options] [--share N | --device cuda:G]\n"
            "                             [-o PROFILE.json]\n"
            "\n"
            "Measure how long each layer of MODEL takes on this machine's CPU (or one of its\n"
            "GPUs, with --device) for a micro-batch of U samples: its forward, its\n"
            "input-gradient backward and its weight-gradient backward (the device\n"
            "synchronized around each layer; each time the median of at least 3 runs after\n"
            "a warm-up). Prints the times per block; -o writes them per layer as a profile\n"
            "(docs/planning.md, \"Measured times\") that 'brigade plan', 'train' and 'bench'\n"
            "read with --profile FILE, where they replace the FLOP-based times.\n"
            "'--profile auto' measures the same on the spot. The convolution is\n"
            "BRG_CPU_CONV's (see 'brigade info').\n"
            "\n"
            "options:\n"
            "  --batch U          samples per micro-batch (the plan scales the times to its own)\n"
            "  --share N          the pipeline runs N CPU devices at once, each on 1/N of the\n"
            "                     cores: measure with that share (default 1: all cores)\n"
            "  --device D         cpu (default) or cuda:G: measure on GPU G, on a device of\n"
            "                     the program's planned size (BRG_CUDA_TF32=1: TF32 products)\n"
            "  -o, --output FILE  write the profile (JSON; - for standard output, the table\n"
            "                     then on standard error)\n"
            ZOO_OPTIONS_HELP
            "  -h, --help         this help\n"
            "\n"
            "Exit status: 0 measured; 2 the command line is wrong; 1 the model cannot be\n"
            "loaded, the run needs more memory than this process can use, or the file\n"
            "cannot be written.\n"
            "\n"
            "examples:\n"
            "  brigade model profile fmnist-cnn --batch 64\n"
            "  brigade model profile inception-v3 --batch 32 --device cuda:0\n"
            "  brigade model profile resnet18 --input 3x64x64 --batch 16 --share 2 -o r18.json\n"
            "  brigade plan resnet18 --input 3x64x64 --devices 2x1GiB --batch 64 --profile r18.json\n");
}

/* ---- option parsing ---- */

enum {
    OPT_BATCH = 256,
    OPT_WEIGHTS,
    OPT_SEED,
    OPT_FROM,
    OPT_SHARE,
    OPT_DEVICE,
};

/* What the command line asked for. */
typedef struct model_args {
    const char *spec;      /* MODEL */
    brg_zoo_options zoo;   /* --input, --classes, --width-mult */
    int zoo_given;         /* any of them given */
    int64_t batch;         /* --batch; 0 if not given */
    const char *output;    /* export -o; NULL if not given */
    const char *weights;   /* export --weights */
    uint64_t seed;         /* export --seed */
    int seed_given;
    const char *from;      /* export --from */
    int64_t share;         /* profile --share; 0 if not given */
    const char *device;    /* profile --device; NULL if not given */
} model_args;

/* Limits that keep the arithmetic of the summary far from overflow; the
 * library checks the real constraints (an input too small, and so on). */
#define MAX_BATCH ((int64_t)1 << 24)

/* Parse argv (argv[0] is the subcommand) with the given options. Returns -1
 * when the command should go on, or the exit code to return now (help was
 * printed, or the command line was wrong and the reason was printed). The
 * subcommand needs exactly `positionals` (0 or 1) arguments: MODEL. */
static int parse_args(int argc, char **argv, const char *shortopts, const struct option *longopts,
                      void (*usage)(FILE *), int positionals, model_args *args)
{
    const char *sub = argv[0];
    char cmd[64]; /* "model summary", for brg_cli_parse_int's messages */
    snprintf(cmd, sizeof cmd, "model %s", sub);
    memset(args, 0, sizeof *args);
    optind = 1;
    opterr = 0; /* our own messages name the subcommand */
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return BRG_EXIT_OK;
        case 'o': args->output = optarg; break;
        case BRG_CLI_OPT_CUTS:
            if (!brg_cli_cuts_option(cmd, optarg)) return BRG_EXIT_USAGE;
            break;
        case BRG_CLI_OPT_INPUT:
        case BRG_CLI_OPT_CLASSES:
        case BRG_CLI_OPT_WIDTH_MULT:
            if (!brg_cli_zoo_option(cmd, c, optarg, &args->zoo)) return BRG_EXIT_USAGE;
            args->zoo_given = 1;
            break;
        case OPT_BATCH:
            if (!brg_cli_parse_int(cmd, "--batch", optarg, 1, MAX_BATCH, &args->batch)) return BRG_EXIT_USAGE;
            break;
        case OPT_WEIGHTS: args->weights = optarg; break;
        case OPT_SHARE:
            if (!brg_cli_parse_int(cmd, "--share", optarg, 1, 4096, &args->share)) return BRG_EXIT_USAGE;
            break;
        case OPT_FROM: args->from = optarg; break;
        case OPT_DEVICE: args->device = optarg; break;
        case OPT_SEED: {
            int64_t v;
            if (!brg_cli_parse_int(cmd, "--seed", optarg, 0, INT64_MAX, &v)) return BRG_EXIT_USAGE;
            args->seed = (uint64_t)v;
            args->seed_given = 1;
            break;
        }
        default: return brg_cli_bad_option(cmd, c, argv);
        }
    }
    int n = argc - optind;
    if (positionals == 1 && n == 0)
        return brg_cli_usage_error(cmd, "missing MODEL (a zoo name or a JSON model file)");
    if (n > positionals) return brg_cli_usage_error(cmd, "unexpected argument '%s'", argv[optind + positionals]);
    if (positionals == 1) args->spec = argv[optind];
    return -1;
}

/* ---- formatting helpers ---- */

/* v with thousands separators ("23,851,784") into buf; returns buf. */
static char *fmt_count(int64_t v, char *buf, size_t size)
{
    char digits[32];
    char tmp[48];
    int neg = v < 0;
    uint64_t u = neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)u);
    size_t k = 0;
    if (neg) tmp[k++] = '-';
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0) tmp[k++] = ',';
        tmp[k++] = digits[i];
    }
    tmp[k] = '\0';
    snprintf(buf, size, "%s", tmp);
    return buf;
}

/* Saturating arithmetic for byte counts: a silly --input times a silly
 * --width-mult must print a huge number, not a wrapped small one. */
static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b) { return b && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

static char *fmt_bytes(uint64_t bytes, char *buf, size_t size)
{
    if (bytes == UINT64_MAX) { /* saturated: said so, not printed as 2^64 */
        snprintf(buf, size, "more than 16 EiB (2^64 bytes)");
        return buf;
    }
    return brg_format_bytes(bytes > SIZE_MAX ? SIZE_MAX : (size_t)bytes, buf, size);
}

/* Bytes of a float32 tensor of one sample. */
static uint64_t tensor_bytes(const brg_model_tensor *t)
{
    return sat_mul(sat_mul(sat_mul((uint64_t)t->c, (uint64_t)t->h), (uint64_t)t->w), sizeof(float));
}

/* Widths of the C, H and W fields of the shape column, so that the
 * dimensions of all rows line up under each other. */
typedef struct shape_widths {
    int c, h, w;
} shape_widths;

static int digits(int64_t v)
{
    char buf[32];
    return snprintf(buf, sizeof buf, "%lld", (long long)v);
}

static void fmt_shape(const brg_model_tensor *t, const shape_widths *sw, char *buf, size_t size)
{
    snprintf(buf, size, "%*lld x %*lld x %*lld", sw->c, (long long)t->c, sw->h, (long long)t->h, sw->w,
             (long long)t->w);
}

/* "3x3/2", "1x7", "3x3": a window and, if not 1, its stride. */
static void fmt_window(const brg_layer_desc *d, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%dx%d", d->kernel_h, d->kernel_w);
    if (n < 0 || (size_t)n >= size) return;
    if (d->stride_h == d->stride_w && d->stride_h != 1)
        snprintf(buf + n, size - (size_t)n, "/%d", d->stride_h);
    else if (d->stride_h != d->stride_w)
        snprintf(buf + n, size - (size_t)n, "/%dx%d", d->stride_h, d->stride_w);
}

/* The type column: the kind and the parameters that tell layers of a kind
 * apart ("conv2d 3x3/2", "maxpool 3x3/2", "concat 4", "dropout 0.5"). */
static void fmt_type(const brg_layer *l, char *buf, size_t size)
{
    const brg_layer_desc *d = &l->desc;
    const char *kind = brg_layer_kind_name(d->kind);
    char win[48];
    switch (d->kind) {
    case BRG_LAYER_CONV2D:
    case BRG_LAYER_MAXPOOL:
    case BRG_LAYER_AVGPOOL:
        fmt_window(d, win, sizeof win);
        snprintf(buf, size, "%s %s", kind, win);
        break;
    case BRG_LAYER_CONCAT: snprintf(buf, size, "%s %d", kind, l->n_inputs); break;
    case BRG_LAYER_DROPOUT: snprintf(buf, size, "%s %g", kind, (double)d->rate); break;
    case BRG_LAYER_UPSAMPLE: snprintf(buf, size, "%s x%d", kind, d->factor); break;
    default: snprintf(buf, size, "%s", kind); break;
    }
}

static int imax(int a, int b) { return a > b ? a : b; }

/* "s" to make a count of n plural ("1 block", "2 blocks"). */
static const char *plural(int64_t n) { return n == 1 ? "" : "s"; }

static void rule(char ch, int width)
{
    for (int i = 0; i < width; i++) putchar(ch);
    putchar('\n');
}

/* ---- list ---- */

/* The zoo as a table; every model is built at its standard settings to
 * count its parameters. A model that fails to build is a bug in the zoo:
 * its row says so and the command exits 1 after the table. */
static int model_list(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    model_args args;
    int rc = parse_args(argc, argv, ":h", opts, usage_list, 0, &args);
    if (rc >= 0) return rc;

    int n = brg_zoo_count();
    char(*inputs)[64] = calloc((size_t)(n > 0 ? n : 1), sizeof *inputs);
    char(*params)[32] = calloc((size_t)(n > 0 ? n : 1), sizeof *params);
    char(*classes)[32] = calloc((size_t)(n > 0 ? n : 1), sizeof *classes);
    if (!inputs || !params || !classes) {
        free(inputs);
        free(params);
        free(classes);
        fprintf(stderr, "brigade model list: out of memory\n");
        return BRG_EXIT_FAILURE;
    }
    int w_name = (int)strlen("Model"), w_input = (int)strlen("Input"), w_classes = (int)strlen("Classes"),
        w_params = (int)strlen("Parameters");
    int failed = 0;
    for (int i = 0; i < n; i++) {
        const brg_zoo_entry *e = brg_zoo_entry_at(i);
        brg_model *m = NULL;
        brg_status st = brg_zoo_build(e->name, NULL, &m);
        if (st == BRG_OK) {
            fmt_count(brg_model_trainable_params(m), params[i], sizeof params[i]);
        } else {
            fprintf(stderr, "brigade model list: building %s: %s\n", e->name,
                    brg_last_error()[0] ? brg_last_error() : brg_status_string(st));
            snprintf(params[i], sizeof params[i], "(fails)");
            failed = 1;
        }
        brg_model_destroy(m);
        snprintf(inputs[i], sizeof inputs[i], "%lldx%lldx%lld", (long long)e->channels, (long long)e->height,
                 (long long)e->width);
        fmt_count(e->classes, classes[i], sizeof classes[i]);
        w_name = imax(w_name, (int)strlen(e->name));
        w_input = imax(w_input, (int)strlen(inputs[i]));
        w_classes = imax(w_classes, (int)strlen(classes[i]));
        w_params = imax(w_params, (int)strlen(params[i]));
    }
    printf("%-*s  %-*s  %*s  %*s  %s\n", w_name, "Model", w_input, "Input", w_classes, "Classes", w_params,
           "Parameters", "Description");
    for (int i = 0; i < n; i++) {
        const brg_zoo_entry *e = brg_zoo_entry_at(i);
        printf("%-*s  %-*s  %*s  %*s  %s\n", w_name, e->name, w_input, inputs[i], w_classes, classes[i], w_params,
               params[i], e->description ? e->description : "");
    }
    printf("\nParameters are the trainable ones at the standard input and width.\n"
           "Every model also takes --input, --classes and --width-mult (see 'brigade model summary --help').\n");
    free(inputs);
    free(params);
    free(classes);
    rc = brg_cli_finish_stdout("model list", BRG_EXIT_OK);
    return failed ? BRG_EXIT_FAILURE : rc;
}

/* ---- summary ---- */

/* The text of one table row; the summary measures all rows before it
 * prints any, so columns fit the longest name or shape. */
typedef struct row {
    char name[BRG_NAME_MAX + 8];
    char type[64];
    char shape[80];
    char params[32];
    char act[32];
} row;

typedef struct widths {
    int name, type, shape, params, act;
} widths;

static void widen(widths *w, const row *r)
{
    w->name = imax(w->name, (int)strlen(r->name));
    w->type = imax(w->type, (int)strlen(r->type));
    w->shape = imax(w->shape, (int)strlen(r->shape));
    w->params = imax(w->params, (int)strlen(r->params));
    w->act = imax(w->act, (int)strlen(r->act));
}

static void print_row(const widths *w, const row *r)
{
    printf("%-*s  %-*s  %*s  %*s  %*s\n", w->name, r->name, w->type, r->type, w->shape, r->shape, w->params,
           r->params, w->act, r->act);
}

/* The "Block boundaries" section: for each cut a partition could make, the
 * tensors that would cross it and their bytes per sample. With more than
 * one tensor (a U-Net skip, a model input read later) their names follow,
 * as many as fit a line. */
static int print_boundaries(const brg_model *m)
{
    int nb = brg_model_block_count(m);
    if (nb < 2) {
        printf("\nBlock boundaries: none (one block)\n");
        return BRG_EXIT_OK;
    }
    int nt = brg_model_tensor_count(m);
    int *ids = malloc((size_t)nt * sizeof *ids);
    char(*counts)[32] = calloc((size_t)nb, sizeof *counts);
    char(*sizes)[48] = calloc((size_t)nb, sizeof *sizes);
    if (!ids || !counts || !sizes) {
        free(ids);
        free(counts);
        free(sizes);
        fprintf(stderr, "brigade model summary: out of memory\n");
        return BRG_EXIT_FAILURE;
    }
    int w_name = 0, w_count = 0, w_size = 0;
    for (int b = 0; b + 1 < nb; b++) {
        int n = 0;
        brg_status st = brg_model_boundary_tensors(m, b, ids, nt, &n);
        if (st != BRG_OK) {
            free(ids);
            free(counts);
            free(sizes);
            return brg_cli_fail("model summary", st);
        }
        uint64_t bytes = 0;
        for (int i = 0; i < n; i++) {
            const brg_model_tensor *t = brg_model_get_tensor(m, ids[i]);
            if (t) bytes = sat_add(bytes, tensor_bytes(t));
        }
        char b1[32];
        snprintf(counts[b], sizeof counts[b], "%d tensor%s", n, n == 1 ? "" : "s");
        snprintf(sizes[b], sizeof sizes[b], "%s/sample", fmt_bytes(bytes, b1, sizeof b1));
        w_name = imax(w_name, (int)strlen(brg_model_block_name(m, b)));
        w_count = imax(w_count, (int)strlen(counts[b]));
        w_size = imax(w_size, (int)strlen(sizes[b]));
    }
    printf("\nBlock boundaries (tensors a pipeline cut after the block sends, float32):\n");
    for (int b = 0; b + 1 < nb; b++) {
        int n = 0;
        (void)brg_model_boundary_tensors(m, b, ids, nt, &n);
        printf("  after %-*s  %-*s  %*s", w_name, brg_model_block_name(m, b), w_count, counts[b], w_size, sizes[b]);
        if (n > 1) {
            /* Name the tensors, up to a line's worth. */
            size_t used = 0;
            for (int i = 0; i < n; i++) {
                const brg_model_tensor *t = brg_model_get_tensor(m, ids[i]);
                const char *name = t ? t->name : "?";
                if (i > 0 && used + strlen(name) > 80) {
                    printf(", +%d more", n - i);
                    break;
                }
                printf("%s%s", i == 0 ? "  (" : ", ", name);
                used += strlen(name) + 2;
            }
            printf(")");
        }
        printf("\n");
    }
    free(ids);
    free(counts);
    free(sizes);
    return BRG_EXIT_OK;
}

/* Print the summary of a finalized model; batch 0 leaves out the batch line. */
static int print_summary(const brg_model *m, int64_t batch)
{
    int nb = brg_model_block_count(m);
    int nl = brg_model_layer_count(m);
    /* rows[0..nl) are layers, rows[nl..nl+nb) block subtotals. */
    row *rows = calloc((size_t)(nl + nb + 1), sizeof *rows);
    if (!rows) {
        fprintf(stderr, "brigade model summary: out of memory\n");
        return BRG_EXIT_FAILURE;
    }
    row head = {"Layer", "Type", "Output shape", "Params", "Act/sample"};
    widths w = {0, 0, 0, 0, 0};
    widen(&w, &head);
    shape_widths sw = {0, 0, 0};
    for (int i = 0; i < nl; i++) {
        const brg_model_tensor *t = brg_model_get_tensor(m, brg_model_get_layer(m, i)->output);
        sw.c = imax(sw.c, digits(t->c));
        sw.h = imax(sw.h, digits(t->h));
        sw.w = imax(sw.w, digits(t->w));
    }
    uint64_t act_total = 0;
    for (int b = 0; b < nb; b++) {
        int first, count;
        brg_model_block_layers(m, b, &first, &count);
        int64_t block_params = 0;
        uint64_t block_act = 0;
        for (int i = first; i < first + count; i++) {
            const brg_layer *l = brg_model_get_layer(m, i);
            const brg_model_tensor *t = brg_model_get_tensor(m, l->output);
            row *r = &rows[i];
            uint64_t act = tensor_bytes(t);
            int64_t p = l->trainable_params + l->frozen_params;
            snprintf(r->name, sizeof r->name, "  %s", l->name);
            fmt_type(l, r->type, sizeof r->type);
            fmt_shape(t, &sw, r->shape, sizeof r->shape);
            fmt_count(p, r->params, sizeof r->params);
            fmt_bytes(act, r->act, sizeof r->act);
            widen(&w, r);
            block_params += p;
            block_act = sat_add(block_act, act);
        }
        row *s = &rows[nl + b];
        snprintf(s->name, sizeof s->name, "  subtotal");
        snprintf(s->type, sizeof s->type, "%d layer%s", count, count == 1 ? "" : "s");
        fmt_count(block_params, s->params, sizeof s->params);
        fmt_bytes(block_act, s->act, sizeof s->act);
        widen(&w, s);
        act_total = sat_add(act_total, block_act);
    }
    int width = w.name + w.type + w.shape + w.params + w.act + 8;

    const brg_model_tensor *in = brg_model_get_tensor(m, brg_model_input(m));
    char b1[32], b2[32];
    printf("Model: %s\n", brg_model_name(m));
    printf("Input: %lld x %lld x %lld, %s class%s, %d block%s, %d layer%s\n", (long long)in->c, (long long)in->h,
           (long long)in->w, fmt_count(brg_model_classes(m), b1, sizeof b1), brg_model_classes(m) == 1 ? "" : "es",
           nb, plural(nb), nl, plural(nl));
    rule('=', width);
    print_row(&w, &head);
    rule('=', width);
    for (int b = 0; b < nb; b++) {
        int first, count;
        brg_model_block_layers(m, b, &first, &count);
        if (b > 0) rule('-', width);
        printf("%s (block %d of %d)\n", brg_model_block_name(m, b), b + 1, nb);
        for (int i = first; i < first + count; i++) print_row(&w, &rows[i]);
        print_row(&w, &rows[nl + b]);
    }
    rule('=', width);
    free(rows);

    int64_t trainable = brg_model_trainable_params(m), frozen = brg_model_frozen_params(m);
    printf("Total params: %s\n", fmt_count(trainable + frozen, b1, sizeof b1));
    printf("Trainable params: %s\n", fmt_count(trainable, b1, sizeof b1));
    printf("Non-trainable params: %s\n", fmt_count(frozen, b1, sizeof b1));
    printf("Parameter memory (float32): %s\n",
           fmt_bytes(sat_mul((uint64_t)(trainable + frozen), sizeof(float)), b1, sizeof b1));
    printf("Activation memory per sample (all layer outputs, float32): %s\n", fmt_bytes(act_total, b1, sizeof b1));
    if (batch > 0)
        printf("Activation memory for batch %lld: %s\n", (long long)batch,
               fmt_bytes(sat_mul(act_total, (uint64_t)batch), b2, sizeof b2));
    printf("Blocks: %d\n", nb);
    return print_boundaries(m);
}

static const struct option summary_opts[] = {
    BRG_CLI_ZOO_OPTIONS,
    {"batch", required_argument, NULL, OPT_BATCH},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int model_summary(int argc, char **argv)
{
    model_args args;
    int rc = parse_args(argc, argv, ":h", summary_opts, usage_summary, 1, &args);
    if (rc >= 0) return rc;
    brg_model *m = NULL;
    rc = brg_cli_load_model("model summary", args.spec, &args.zoo, args.zoo_given, &m);
    if (rc >= 0) return rc;
    rc = print_summary(m, args.batch);
    brg_model_destroy(m);
    if (rc != BRG_EXIT_OK) return rc;
    return brg_cli_finish_stdout("model summary", BRG_EXIT_OK);
}

/* ---- export ---- */

static const struct option export_opts[] = {
    BRG_CLI_ZOO_OPTIONS,
    {"output", required_argument, NULL, 'o'},
    {"weights", required_argument, NULL, OPT_WEIGHTS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"from", required_argument, NULL, OPT_FROM},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Whether the files a command writes (output, weights; NULL when not
 * written, "-" for standard output) stay apart from each other, from the
 * file it reads (spec: a file, or a zoo model's name) and from checkpoint
 * folders; else says which clash, for exit 2. */
static int outputs_apart(const char *cmd, const char *spec_name, const char *spec, const char *output,
                         const char *weights)
{
    struct stat sb;
    if (weights && strcmp(weights, "-") == 0) { /* it wrote a file named "-" */
        fprintf(stderr, "brigade %s: --weights - : the weights are a binary safetensors file, not written to standard "
                        "output; give a file name\n", cmd);
        return 0;
    }
    const int spec_is_file = spec && stat(spec, &sb) == 0; /* not a zoo model's name */
    const char *out = output && strcmp(output, "-") != 0 ? output : NULL;
    const char *first = NULL, *second = NULL, *file = NULL;
    if (brg_cli_same_path(weights, out)) first = "--weights", second = "-o", file = weights;
    else if (spec_is_file && brg_cli_same_path(weights, spec)) first = "--weights", second = spec_name, file = weights;
    else if (spec_is_file && brg_cli_same_path(out, spec)) first = "-o", second = spec_name, file = out;
    if (first) {
        fprintf(stderr, "brigade %s: %s and %s name the same file %s: give each its own\n", cmd, first, second, file);
        return 0;
    }
    const char *inside = weights && brg_checkpoint_contains(weights) ? weights
                         : out && brg_checkpoint_contains(out)     ? out
                                                                   : NULL;
    if (inside) {
        fprintf(stderr, "brigade %s: %s is in a checkpoint's folder, which a file written there would break: give "
                        "a path outside it\n", cmd, inside);
        return 0;
    }
    return 1;
}

/* export_checkpoint_weights: the checkpoint is of another model. */
#define OTHER_MODEL (-2)

/* The weights of the newest checkpoint in dir, which must be of model m,
 * written to path; from gets the checkpoint's folder. -1 when written,
 * OTHER_MODEL, else the exit code (the reason printed). */
static int export_checkpoint_weights(const brg_model *m, const char *dir, const char *path, char *from,
                                     size_t from_size)
{
    const char *cmd = "model export: --from";
    char skipped[2048];
    brg_checkpoint_manifest man;
    brg_status st = brg_checkpoint_latest_read(dir, from, from_size, &man, skipped, sizeof skipped);
    if (st != BRG_OK) return brg_cli_fail(cmd, st);
    if (skipped[0]) fprintf(stderr, "brigade model export: passed over incomplete checkpoints: %s\n", skipped);
    /* Another model's checkpoint is the wrong MODEL or --from given (exit 2,
     * as train --resume and eval say it); a damaged manifest is exit 1. */
    st = brg_checkpoint_check_model(m, from, &man);
    brg_checkpoint_manifest_free(&man);
    if (st == BRG_ERR_INVALID_ARGUMENT) {
        brg_cli_fail(cmd, st);
        fprintf(stderr, "brigade model export: give the model file, or a zoo model's --input, --classes and "
                        "--width-mult, that the checkpoint was made with\n");
        return OTHER_MODEL;
    }
    if (st != BRG_OK) return brg_cli_fail(cmd, st);
    char file[4200];
    snprintf(file, sizeof file, "%s/weights.safetensors", from);
    brg_safetensors *in = NULL;
    st = brg_safetensors_open(file, &in);
    if (st != BRG_OK) return brg_cli_fail(cmd, st);
    const int n = brg_safetensors_count(in);
    brg_safetensor *ts = calloc(n > 0 ? (size_t)n : 1, sizeof *ts);
    int rc = -1;
    if (!ts) {
        fprintf(stderr, "brigade model export: out of host memory reading %s\n", file);
        rc = BRG_EXIT_FAILURE;
    }
    for (int i = 0; i < n && rc < 0; i++) {
        st = brg_safetensors_get(in, i, &ts[i]);
        if (st != BRG_OK) rc = brg_cli_fail(cmd, st);
    }
    const char *keys[3] = {"brigade.model", "brigade.parts", "brigade.from"};
    const char *values[3] = {brg_model_name(m), "weights", from};
    if (rc < 0) {
        st = brg_safetensors_write(path, ts, n, keys, values, 3);
        if (st != BRG_OK) rc = brg_cli_fail("model export", st);
    }
    free(ts);
    brg_safetensors_close(in);
    return rc;
}

/* export --weights: -1 to go on, else the exit code. What was written is
 * said on standard error when the model's JSON goes to standard output. */
static int export_weights(const model_args *args, const brg_model *m)
{
    FILE *report = args->output && strcmp(args->output, "-") == 0 ? stderr : stdout;
    char from[4096] = "";
    if (args->from) {
        const int rc = export_checkpoint_weights(m, args->from, args->weights, from, sizeof from);
        if (rc == OTHER_MODEL) return BRG_EXIT_USAGE;
        if (rc >= 0) return rc == BRG_EXIT_USAGE ? BRG_EXIT_FAILURE : rc;
        fprintf(report, "wrote %s: the weights of model %s from %s\n", args->weights, brg_model_name(m), from);
        return -1;
    }
    const uint64_t seed = args->seed_given ? args->seed : 1;
    const brg_status st = brg_model_save_initial_weights(m, seed, args->weights);
    if (st != BRG_OK) {
        brg_cli_fail("model export", st);
        return BRG_EXIT_FAILURE;
    }
    fprintf(report, "wrote %s: the initial weights of model %s for seed %llu (%lld parameters)\n", args->weights,
            brg_model_name(m), (unsigned long long)seed,
            (long long)(brg_model_trainable_params(m) + brg_model_frozen_params(m)));
    return -1;
}

static int model_export(int argc, char **argv)
{
    model_args args;
    int rc = parse_args(argc, argv, ":ho:", export_opts, usage_export, 1, &args);
    if (rc >= 0) return rc;
    if ((!args.output || !args.output[0]) && !args.weights) {
        fprintf(stderr, "brigade model export: say where to write with -o FILE.json (or -o - for standard output), "
                        "or --weights W.safetensors\n");
        return BRG_EXIT_USAGE;
    }
    if ((args.seed_given || args.from) && !args.weights) {
        fprintf(stderr, "brigade model export: --seed and --from choose the weights of --weights W.safetensors\n");
        return BRG_EXIT_USAGE;
    }
    if (args.seed_given && args.from) {
        fprintf(stderr, "brigade model export: --seed gives initial weights, --from a checkpoint's: give one\n");
        return BRG_EXIT_USAGE;
    }
    if (!outputs_apart("model export", "MODEL", args.spec, args.output, args.weights)) return BRG_EXIT_USAGE;
    brg_model *m = NULL;
    rc = brg_cli_load_model("model export", args.spec, &args.zoo, args.zoo_given, &m);
    if (rc >= 0) return rc;
    if (args.weights && !args.seed_given && !args.from && brg_cli_model_is_import(args.spec)) {
        /* --weights here writes a seed's or a checkpoint's: for a file that
         * holds trained weights, the seed's would silently replace them. */
        brg_import *imp = NULL;
        const int has = brg_import_file(args.spec, &imp) == BRG_OK && brg_import_has_weights(imp);
        brg_import_free(imp);
        if (has) {
            brg_model_destroy(m);
            fprintf(stderr, "brigade model export: %s holds its own weights, and --weights writes a seed's initial "
                            "ones: 'brigade model import %s%s%s --weights %s' writes the file's; give --seed S for a "
                            "seed's\n", args.spec, args.spec, args.output ? " -o " : "", args.output ? args.output : "",
                    args.weights);
            return BRG_EXIT_USAGE;
        }
    }
    if (args.weights) {
        rc = export_weights(&args, m);
        if (rc >= 0 || !args.output) {
            brg_model_destroy(m);
            return rc >= 0 ? rc : brg_cli_finish_stdout("model export", BRG_EXIT_OK);
        }
    }
    brg_status st;
    if (strcmp(args.output, "-") == 0) {
        char *text = NULL;
        st = brg_model_to_json(m, &text);
        brg_model_destroy(m);
        if (st != BRG_OK) return brg_cli_fail("model export", st);
        fputs(text, stdout);
        if (text[0] && text[strlen(text) - 1] != '\n') putchar('\n');
        brg_free(text);
        return brg_cli_finish_stdout("model export", BRG_EXIT_OK);
    }
    st = brg_model_save_json(m, args.output);
    if (st != BRG_OK) {
        brg_model_destroy(m);
        /* A path that cannot be written is a failure of the work, not of
         * the command line, whatever status the writer chose. */
        brg_cli_fail("model export", st);
        return BRG_EXIT_FAILURE;
    }
    printf("wrote %s: model %s, %d block%s, %d layer%s\n", args.output, brg_model_name(m), brg_model_block_count(m),
           plural(brg_model_block_count(m)), brg_model_layer_count(m), plural(brg_model_layer_count(m)));
    brg_model_destroy(m);
    return brg_cli_finish_stdout("model export", BRG_EXIT_OK);
}

/* ---- import ---- */

static const struct option import_opts[] = {
    {"output", required_argument, NULL, 'o'},
    {"weights", required_argument, NULL, OPT_WEIGHTS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* brg_model_save_weights's fill: the import's values of (layer, param). */
static brg_status fill_imported(void *ctx, int layer, int param, float *values)
{
    const brg_import *imp = ctx;
    for (int i = 0; i < brg_import_weight_count(imp); i++) {
        brg_import_weight w;
        if (brg_import_get_weight(imp, i, &w) != BRG_OK || w.layer != layer || w.param != param) continue;
        memcpy(values, w.values, (size_t)w.count * sizeof *values);
        return BRG_OK;
    }
    return BRG_ERR_INTERNAL; /* every parameter has a weight: checked before */
}

/* The report: what came in, the blocks, the notes. */
static void print_import(FILE *out, const char *path, const brg_import *imp)
{
    const brg_model *m = brg_import_model(imp);
    char total[32], trainable[32];
    const brg_model_tensor *in = brg_model_get_tensor(m, brg_model_input(m));
    const brg_model_tensor *o = brg_model_get_tensor(m, brg_model_output(m));
    fprintf(out, "imported %s: model %s, input %lldx%lldx%lld, output %lldx%lldx%lld\n", path, brg_model_name(m),
            (long long)in->c, (long long)in->h, (long long)in->w, (long long)o->c, (long long)o->h, (long long)o->w);
    fprintf(out, "  %d layer%s in %d block%s, %s parameters (%s trainable)\n", brg_model_layer_count(m),
            plural(brg_model_layer_count(m)), brg_model_block_count(m), plural(brg_model_block_count(m)),
            fmt_count(brg_model_trainable_params(m) + brg_model_frozen_params(m), total, sizeof total),
            fmt_count(brg_model_trainable_params(m), trainable, sizeof trainable));
    fprintf(out, "  blocks:");
    int col = 10;
    for (int b = 0; b < brg_model_block_count(m); b++) {
        const char *name = brg_model_block_name(m, b);
        const int len = (int)strlen(name) + 1;
        if (col + len > 100) {
            fprintf(out, "\n         ");
            col = 10;
        }
        fprintf(out, " %s", name);
        col += len;
    }
    fprintf(out, "\n");
    for (int i = 0; i < brg_import_note_count(imp); i++) fprintf(out, "  note: %s\n", brg_import_note(imp, i));
}

static int model_import(int argc, char **argv)
{
    model_args args;
    int rc = parse_args(argc, argv, ":ho:", import_opts, usage_import, 1, &args);
    if (rc >= 0) return rc;
    if (!outputs_apart("model import", "FILE", args.spec, args.output, args.weights)) return BRG_EXIT_USAGE;
    brg_import *imp = NULL;
    brg_status st = brg_import_file(args.spec, &imp);
    if (st != BRG_OK) return brg_cli_fail("model import", st); /* 2 for a file of another kind given */
    const brg_model *m = brg_import_model(imp);
    const int to_stdout = args.output && strcmp(args.output, "-") == 0;
    print_import(to_stdout ? stderr : stdout, args.spec, imp);
    rc = BRG_EXIT_OK;
    if (args.weights && !brg_import_has_weights(imp)) {
        for (int i = 0; i < brg_import_weight_count(imp); i++) {
            brg_import_weight w;
            if (brg_import_get_weight(imp, i, &w) == BRG_OK && !w.values) {
                fprintf(stderr, "brigade model import: %s gives no values for weight '%s' (a Keras JSON file holds "
                                "none, an ONNX graph input has none): there are no weights to write\n",
                        args.spec, w.source);
                break;
            }
        }
        rc = BRG_EXIT_FAILURE;
    }
    if (rc == BRG_EXIT_OK && args.weights) {
        const char *keys[2] = {"brigade.model", "brigade.from"};
        const char *values[2] = {brg_model_name(m), args.spec};
        st = brg_model_save_weights(m, fill_imported, imp, args.weights, keys, values, 2);
        if (st != BRG_OK) {
            brg_cli_fail("model import", st);
            rc = BRG_EXIT_FAILURE;
        } else fprintf(to_stdout ? stderr : stdout, "wrote %s: the file's weights in brigade's layout (%d tensors)\n",
                       args.weights, brg_import_weight_count(imp));
    }
    if (rc == BRG_EXIT_OK && args.output) {
        if (to_stdout) {
            char *text = NULL;
            st = brg_model_to_json(m, &text);
            if (st == BRG_OK) {
                fputs(text, stdout);
                if (text[0] && text[strlen(text) - 1] != '\n') putchar('\n');
                brg_free(text);
            }
        } else {
            st = brg_model_save_json(m, args.output);
            if (st == BRG_OK) printf("wrote %s: the model as a JSON model file\n", args.output);
        }
        if (st != BRG_OK) {
            brg_cli_fail("model import", st);
            rc = BRG_EXIT_FAILURE;
        }
    }
    if (rc == BRG_EXIT_OK && !args.output && !args.weights)
        printf("(nothing written: -o FILE.json keeps the model, --weights W.safetensors its weights)\n");
    brg_import_free(imp);
    return rc == BRG_EXIT_OK ? brg_cli_finish_stdout("model import", rc) : rc;
}

/* ---- dispatch ---- */

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *out);
} subcommand;

/* ---- profile ---- */

static const struct option profile_opts[] = {
    BRG_CLI_ZOO_OPTIONS,
    {"batch", required_argument, NULL, OPT_BATCH},
    {"share", required_argument, NULL, OPT_SHARE},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The measured times per block, with each block's share of the total. */
static void print_profile(FILE *out, const brg_model *m, const brg_profile *p, const char *where)
{
    double total = 0.0;
    for (int l = 0; l < p->n_layers; l++) total += p->fwd[l] + p->bwd_in[l] + p->bwd_w[l];
    fprintf(out, "%s on %s, micro-batches of %d: median times in ms\n\n", brg_model_name(m), where, p->micro_batch);
    int wide = 5;
    for (int b = 0; b < brg_model_block_count(m); b++) {
        const int n = (int)strlen(brg_model_block_name(m, b));
        wide = n > wide ? n : wide;
    }
    fprintf(out, "%-*s  %10s  %10s  %10s  %10s  %6s\n", wide, "block", "forward", "bwd input", "bwd weight", "total",
           "share");
    for (int b = 0; b < brg_model_block_count(m); b++) {
        int first, count;
        brg_model_block_layers(m, b, &first, &count);
        double f = 0.0, bi = 0.0, bw = 0.0;
        for (int l = first; l < first + count; l++) {
            f += p->fwd[l];
            bi += p->bwd_in[l];
            bw += p->bwd_w[l];
        }
        fprintf(out, "%-*s  %10.3f  %10.3f  %10.3f  %10.3f  %5.1f%%\n", wide, brg_model_block_name(m, b), 1e3 * f,
                1e3 * bi, 1e3 * bw, 1e3 * (f + bi + bw), total > 0 ? 100.0 * (f + bi + bw) / total : 0.0);
    }
    fprintf(out, "\nforward and backward of one micro-batch: %.3f ms (%.4g samples/s on one device; the loss\n"
           "counts as the last layer's, the optimizer step is not included)\n",
           1e3 * total, total > 0 ? p->micro_batch / total : 0.0);
}

/* --device SPEC: one CPU or CUDA device ("cuda:1"; a size is not needed). */
static int profile_device(const model_args *args, brg_device_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->backend = BRG_BACKEND_CPU;
    spec->gpu = -1;
    spec->vdev = -1;
    if (!args->device || strcmp(args->device, "cpu") == 0) return -1;
    int n = 0;
    brg_device_spec specs[2];
    if (brg_device_spec_parse(args->device, specs, 2, &n) != BRG_OK)
        return brg_cli_usage_error("model profile", "--device %s: %s", args->device, brg_last_error());
    if (n != 1)
        return brg_cli_usage_error("model profile", "--device %s: give one device (e.g. cuda:0)", args->device);
    if (specs[0].backend == BRG_BACKEND_CPU && specs[0].async)
        return brg_cli_usage_error("model profile", "--device %s: measure on cpu (the synchronous CPU device) or a GPU",
                                   args->device);
    *spec = specs[0];
    if (spec->backend == BRG_BACKEND_CUDA && args->share)
        return brg_cli_usage_error("model profile",
                                   "--share divides this machine's CPU cores; a GPU is measured whole");
    return -1;
}

static int model_profile(int argc, char **argv)
{
    model_args args;
    int rc = parse_args(argc, argv, ":ho:", profile_opts, usage_profile, 1, &args);
    if (rc >= 0) return rc;
    if (!args.batch) return brg_cli_usage_error("model profile", "--batch U (samples per micro-batch) is required");
    if (args.batch > INT32_MAX)
        return brg_cli_usage_error("model profile", "--batch %lld is too large", (long long)args.batch);
    brg_device_spec spec;
    rc = profile_device(&args, &spec);
    if (rc >= 0) return rc;
    /* A folder for -o fails the save only after the whole measuring. */
    struct stat sb;
    if (args.output && strcmp(args.output, "-") != 0 && stat(args.output, &sb) == 0 && S_ISDIR(sb.st_mode))
        return brg_cli_usage_error("model profile", "-o %s is a folder; give a file name (or - for standard output)",
                                   args.output);
    brg_model *m = NULL;
    rc = brg_cli_load_model("model profile", args.spec, &args.zoo, args.zoo_given, &m);
    if (rc >= 0) return rc;
    const int share = args.share ? (int)args.share : 1;
    const brg_plan_options defaults = brg_plan_options_init();
    const int gpu = spec.backend == BRG_BACKEND_CUDA;
    /* Where the times come from, for the table and the profile's "device". */
    char where[224], device[224];
    brg_system_info info;
    if (brg_system_info_get(&info) != BRG_OK) {
        memset(&info, 0, sizeof info);
        snprintf(info.cpu_model, sizeof info.cpu_model, "CPU");
    }
    if (gpu) {
        const char *name = "GPU";
        for (int i = 0; i < info.gpu_count; i++)
            if (info.gpus[i].index == spec.gpu) name = info.gpus[i].name;
        snprintf(where, sizeof where, "GPU %d (%s)", spec.gpu, name);
        snprintf(device, sizeof device, "%s, cuda:%d%s", name, spec.gpu,
                 brg_cuda_tf32_enabled() ? ", TF32" : "");
    } else {
        snprintf(where, sizeof where, "this CPU (%s convolution%s)", brg_cpu_convolution(),
                 share > 1 ? ", a share of the cores" : "");
        snprintf(device, sizeof device, "%s, %s convolution, 1/%d of the cores", info.cpu_model,
                 brg_cpu_convolution(), share);
        /* Each share has at least one thread, as each pipeline device does. */
        if (info.cores > 0 && share > info.cores)
            fprintf(stderr, "brigade model profile: note: --share %d is more than this machine's %d cores: each "
                            "share is one thread, and so is the measuring\n", share, info.cores);
    }
    fprintf(stderr, "brigade model profile: measuring %s at micro-batches of %lld on %s...\n", brg_model_name(m),
            (long long)args.batch, where);
    brg_profile *p = NULL;
    brg_status st = gpu ? brg_profile_measure_on(m, (int)args.batch, &spec, &defaults.optimizer, &p)
                        : brg_profile_measure(m, (int)args.batch, share, &defaults.optimizer, &p);
    if (st == BRG_OK && args.output) st = brg_profile_save(m, p, device, args.output);
    if (st != BRG_OK) {
        brg_cli_error("model profile", "%s", brg_last_error());
        brg_profile_destroy(p);
        brg_model_destroy(m);
        return BRG_EXIT_FAILURE;
    }
    /* With -o -, the profile is standard output and the table goes to stderr. */
    const int to_stdout = args.output && strcmp(args.output, "-") == 0;
    print_profile(to_stdout ? stderr : stdout, m, p, where);
    if (args.output && !to_stdout)
        printf("profile written to %s (use it with --profile %s)\n", args.output, args.output);
    brg_profile_destroy(p);
    brg_model_destroy(m);
    return brg_cli_finish_stdout("model profile", BRG_EXIT_OK);
}

static const subcommand subcommands[] = {
    {"list", model_list, usage_list},
    {"summary", model_summary, usage_summary},
    {"export", model_export, usage_export},
    {"import", model_import, usage_import},
    {"profile", model_profile, usage_profile},
};

int brg_cmd_model(int argc, char **argv)
{
    const size_t n_sub = sizeof subcommands / sizeof subcommands[0];
    if (argc < 2) {
        fprintf(stderr, "brigade model: missing subcommand (list, summary, export, import or profile)\n\n");
        usage_model(stderr);
        return BRG_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage_model(stdout);
        return BRG_EXIT_OK;
    }
    if (strcmp(name, "help") == 0) {
        /* "brigade model help summary" as well as "brigade model help". */
        if (argc < 3) {
            usage_model(stdout);
            return BRG_EXIT_OK;
        }
        for (size_t i = 0; i < n_sub; i++)
            if (strcmp(argv[2], subcommands[i].name) == 0) {
                subcommands[i].usage(stdout);
                return BRG_EXIT_OK;
            }
        fprintf(stderr, "brigade model: unknown subcommand '%s'\n\n", argv[2]);
        usage_model(stderr);
        return BRG_EXIT_USAGE;
    }
    for (size_t i = 0; i < n_sub; i++)
        if (strcmp(name, subcommands[i].name) == 0) return subcommands[i].run(argc - 1, argv + 1);
    if (name[0] == '-')
        fprintf(stderr,
                "brigade model: expected a subcommand (list, summary, export, import or profile) before '%s'\n\n",
                name);
    else
        fprintf(stderr, "brigade model: unknown subcommand '%s'\n\n", name);
    usage_model(stderr);
    return BRG_EXIT_USAGE;
}

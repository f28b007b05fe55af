/* MODEL arguments: a zoo name, a JSON model file, an ONNX file or a Keras
 * model's JSON, with zoo options (see cli.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli-lib.h"

brg_status brg_cli_parse_input(const char *cmd, const char *text, brg_zoo_options *options)
{
    long long v[3];
    int n = 0;
    const char *p = text;
    while (n < 3) {
        char *end = NULL;
        errno = 0;
        v[n] = strtoll(p, &end, 10);
        if (end == p || errno || v[n] < 1 || v[n] > (1 << 20)) {
            n = -1;
            break;
        }
        n++;
        if (*end == '\0') {
            p = end;
            break;
        }
        if (*end != 'x' || n == 3) {
            n = -1;
            break;
        }
        p = end + 1;
    }
    if (*p != '\0' || (n != 2 && n != 3)) {
        brg_cli_error(cmd, "--input '%s' is not CxHxW or HxW with numbers from 1 to %d (e.g. 3x299x299)", text,
                      1 << 20);
        return BRG_ERR_INVALID_ARGUMENT;
    }
    if (n == 3) {
        options->channels = v[0];
        options->height = v[1];
        options->width = v[2];
    } else {
        options->height = v[0];
        options->width = v[1];
    }
    return BRG_OK;
}

int brg_cli_zoo_option(const char *cmd, int opt, const char *text, brg_zoo_options *options)
{
    if (opt == BRG_CLI_OPT_INPUT) return brg_cli_parse_input(cmd, text, options) == BRG_OK;
    if (opt == BRG_CLI_OPT_CLASSES)
        return brg_cli_parse_int(cmd, "--classes", text, 1, BRG_CLI_MAX_CLASSES, &options->classes);
    double f = 0.0;
    if (!brg_cli_parse_real(cmd, "--width-mult", text, 0, &f)) return 0;
    if (!(f > 0.0 && f <= BRG_CLI_MAX_WIDTH_MULT)) {
        brg_cli_error(cmd, "--width-mult '%s' must be greater than 0 and at most %g", text, BRG_CLI_MAX_WIDTH_MULT);
        return 0;
    }
    options->width_mult = f;
    return 1;
}

/* The command line's --cuts: 1 for fine. One command runs per process. */
static int fine_cuts;

int brg_cli_cuts_option(const char *cmd, const char *text)
{
    if (strcmp(text, "fine") == 0 || strcmp(text, "blocks") == 0) {
        fine_cuts = strcmp(text, "fine") == 0;
        return 1;
    }
    brg_cli_error(cmd, "--cuts '%s' is not 'fine' or 'blocks'", text);
    return 0;
}

static int ends_with(const char *s, const char *tail)
{
    const size_t n = strlen(s), k = strlen(tail);
    return n > k && strcmp(s + n - k, tail) == 0;
}

static int looks_like_file(const char *spec)
{
    struct stat st;
    if (strchr(spec, '/') || ends_with(spec, ".json") || ends_with(spec, ".onnx") || ends_with(spec, ".keras"))
        return 1;
    return stat(spec, &st) == 0 && S_ISREG(st.st_mode) && !brg_zoo_find(spec);
}

/* Whether a .json file is a Keras model (model.to_json()) rather than a
 * brigade model file: its top-level object starts with Keras's keys. */
static int keras_json(const char *path)
{
    char head[512] = "";
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    const size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    return strstr(head, "\"class_name\"") && !strstr(head, "\"brigade-model\"");
}

int brg_cli_model_is_import(const char *spec)
{
    return looks_like_file(spec) && (ends_with(spec, ".onnx") || ends_with(spec, ".keras") ||
                                     (ends_with(spec, ".json") && keras_json(spec)));
}

/* An ONNX or Keras file as MODEL: its model, its notes on standard error,
 * and for the commands that compute with weights, how to bring the file's
 * along. */
static brg_status load_import(const char *what, const char *path, brg_model **out)
{
    brg_import *imp = NULL;
    const brg_status st = brg_import_file(path, &imp);
    if (st != BRG_OK) return st;
    /* Headed like the CLI's other notes and warnings: the command, then
     * the kind of message, then the file it is about. */
    for (int i = 0; i < brg_import_note_count(imp); i++)
        fprintf(stderr, "%s %s: note: %s: %s\n", brg_cli_program, what, path, brg_import_note(imp, i));
    const int train = strcmp(what, "train") == 0;
    if (brg_import_has_weights(imp) && brg_import_weight_count(imp) > 0 && (train || strcmp(what, "eval") == 0))
        fprintf(stderr,
                "%s %s: note: %s: the file's weights are not read here (%s); to %s them, 'brigade model import %s -o "
                "MODEL.json --weights W.safetensors', then %s W.safetensors\n",
                brg_cli_program, what, path, train ? "training starts from --seed's" : "eval reads --weights",
                train ? "start from" : "evaluate", path, train ? "--init-weights" : "--weights");
    *out = brg_import_take_model(imp);
    brg_import_free(imp);
    return BRG_OK;
}

/* The model, or BRG_ERR_INVALID_ARGUMENT after a message of our own (with
 * no library message) when the command line is wrong. */
static brg_status load_model(const char *what, const char *spec, const brg_zoo_options *options, int options_given,
                             brg_model **out)
{
    *out = NULL;
    if (looks_like_file(spec)) {
        if (options_given) {
            if (brg_cli_model_is_import(spec))
                brg_cli_error(what, "--input, --classes and --width-mult apply to zoo models; '%s' is a model file, "
                                    "whose sizes are its own: export it again with others, or edit the JSON model "
                                    "file that 'brigade model import %s -o MODEL.json' writes", spec, spec);
            else
                brg_cli_error(what, "--input, --classes and --width-mult apply to zoo models; '%s' is a model file, "
                                    "edit its input and layers instead", spec);
            return BRG_ERR_INVALID_ARGUMENT;
        }
        if (brg_cli_model_is_import(spec)) return load_import(what, spec, out);
        return brg_model_load_json(spec, out);
    }
    if (!brg_zoo_find(spec)) {
        fprintf(stderr, "brigade %s: '%s' is neither a zoo model nor a model file; zoo models:", what, spec);
        for (int i = 0; i < brg_zoo_count(); i++) fprintf(stderr, " %s", brg_zoo_entry_at(i)->name);
        fprintf(stderr, " (see 'brigade model list')\n");
        return BRG_ERR_INVALID_ARGUMENT;
    }
    return brg_zoo_build(spec, options, out);
}

int brg_cli_load_model(const char *what, const char *spec, const brg_zoo_options *options, int options_given,
                       brg_model **out)
{
    brg_clear_error(); /* a message left by earlier calls is not this failure's */
    brg_status st = load_model(what, spec, options, options_given, out);
    if (st == BRG_OK && fine_cuts) {
        brg_model *fine = NULL;
        st = brg_model_split_blocks(*out, &fine);
        brg_model_destroy(*out);
        *out = fine;
    }
    if (st == BRG_OK) return -1;
    if (st == BRG_ERR_INVALID_ARGUMENT && !brg_last_error()[0]) return BRG_EXIT_USAGE; /* said already */
    return brg_cli_fail(what, st);
}

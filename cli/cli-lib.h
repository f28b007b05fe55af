/* brigade command line: the helpers the commands share, built as a small
 * library (libbrg_cli.la) that the benches link too: arguments and their
 * messages (args.c), MODEL arguments (model_arg.c), plan options and the
 * plan table (plan_print.c, plan_print.h), synthetic data (synthetic.c).
 * Public API only. */
#ifndef BRIGADE_CLI_LIB_H
#define BRIGADE_CLI_LIB_H

#include <stdint.h>
#include <stdio.h>

#include "brigade.h"

#define BRG_EXIT_OK 0
#define BRG_EXIT_FAILURE 1
#define BRG_EXIT_USAGE 2

/* MODEL arguments (model_arg.c): a zoo name, a JSON model file or an ONNX
 * file (docs/import.md).
 * Parse "CxHxW" (or "HxW", keeping the channels) into options; else says
 * why, headed by cmd (brg_cli_error), and returns BRG_ERR_INVALID_ARGUMENT. */
brg_status brg_cli_parse_input(const char *cmd, const char *text, brg_zoo_options *options);
/* Build or load the model into *out and return -1. Options (from --input,
 * --classes, --width-mult) apply to zoo models; given with a file, they are
 * an error. Otherwise prints why and returns the exit code: BRG_EXIT_USAGE
 * for a MODEL that is neither a zoo name nor a file, or options with a
 * file; else brg_cli_fail(what, status)'s. */
int brg_cli_load_model(const char *what, const char *spec, const brg_zoo_options *options, int options_given,
                       brg_model **out);
/* Whether brg_cli_load_model reads MODEL through the importer (an ONNX
 * file, a .keras archive, a Keras model's JSON). */
int brg_cli_model_is_import(const char *spec);

/* The zoo options of every command that takes MODEL: getopt values above
 * the commands' own, the rows of their option tables (getopt.h), and one
 * parser of --input, --classes (1 .. BRG_CLI_MAX_CLASSES) and --width-mult
 * (0 .. BRG_CLI_MAX_WIDTH_MULT) for getopt value opt into options. The
 * limits keep a summary's arithmetic far from overflow; the library checks
 * the real constraints. Prints why not and returns 0; 1 otherwise. */
enum { BRG_CLI_OPT_INPUT = 1024, BRG_CLI_OPT_CLASSES, BRG_CLI_OPT_WIDTH_MULT, BRG_CLI_OPT_CUTS };
#define BRG_CLI_ZOO_OPTIONS                                                                        \
    {"input", required_argument, NULL, BRG_CLI_OPT_INPUT},                                         \
    {"classes", required_argument, NULL, BRG_CLI_OPT_CLASSES},                                     \
    {"width-mult", required_argument, NULL, BRG_CLI_OPT_WIDTH_MULT},                               \
    {"cuts", required_argument, NULL, BRG_CLI_OPT_CUTS}
#define BRG_CLI_MAX_CLASSES ((int64_t)1000000) /* the zoo's own limit: refused here, not with its "0 =" hint */
#define BRG_CLI_MAX_WIDTH_MULT 1000.0
int brg_cli_zoo_option(const char *cmd, int opt, const char *text, brg_zoo_options *options);
/* --cuts blocks|fine, for any MODEL: brg_cli_load_model then cuts the
 * model's blocks finer (brg_model_split_blocks) for fine. Prints why not
 * and returns 0; 1 otherwise. */
int brg_cli_cuts_option(const char *cmd, const char *text);
#define BRG_CLI_CUTS_HELP                                                                          \
    "  --cuts fine|blocks    fine: also cut inside blocks where one tensor alone crosses\n"        \
    "                        (Inception's stem), for a finer partition (default blocks)\n"

/* Print "brigade: <what>: <last error>" to stderr and return BRG_EXIT_FAILURE
 * (BRG_EXIT_USAGE for BRG_ERR_INVALID_ARGUMENT). */
int brg_cli_fail(const char *what, brg_status status);

/* Arguments (args.c). Messages go to stderr as "brigade CMD: ..." (cmd
 * being "plan", "model summary", ...), or "brigade: ..." for a NULL cmd;
 * another program that compiles args.c sets brg_cli_program to its name. */
extern const char *brg_cli_program;
void brg_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A wrong command line: the message as brg_cli_error prints it, then where
 * --help is; returns BRG_EXIT_USAGE. */
int brg_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* What getopt_long (opterr = 0) found wrong, c being ':' (a missing value)
 * or anything else (an unknown option), and where --help is; returns
 * BRG_EXIT_USAGE. */
int brg_cli_bad_option(const char *cmd, int c, char **argv);
/* Paths (args.c). resolve: path made absolute with links and "." / ".."
 * resolved, as far as it exists (a path not there yet keeps its missing
 * names), without trailing slashes, into out. same_path: a and b name one
 * file or folder (the same one there, or the same resolved name). within:
 * path is folder or lies below it. */
void brg_cli_resolve_path(const char *path, char *out, size_t size);
int brg_cli_same_path(const char *a, const char *b);
int brg_cli_path_within(const char *path, const char *folder);
/* code, or BRG_EXIT_FAILURE after a message when stdout could not be
 * written (a full disk, a closed pipe): never claim success then. */
int brg_cli_finish_stdout(const char *cmd, int code);
/* s for a table, a list or a message line: each byte that is a control
 * character or not part of valid UTF-8 as \n, \t or \xHH (a file name may
 * hold any byte but '/' and NUL, and a raw newline or a stray byte would
 * break the line or the terminal), cut to fit buf. *width (when given) is
 * the characters shown. Returns buf. */
const char *brg_cli_shown(const char *s, char *buf, size_t size, int *width);
/* Room for a path of the command line's path buffers (4200 bytes) once
 * brg_cli_shown has escaped it: each byte at most 4, and the NUL. */
#define BRG_CLI_SHOWN_PATH_MAX (4200 * 4 + 8)
/* A whole decimal number in [min, max] (no '+') for option name. Prints why
 * not and returns 0; 1 otherwise. */
int brg_cli_parse_int(const char *cmd, const char *name, const char *text, int64_t min, int64_t max, int64_t *value);
/* A finite number for option name, also as a percentage ("10%" is 0.1)
 * when percent is 1; a negative zero ("-0", "-0%") is 0. Prints why not
 * and returns 0; 1 otherwise. */
int brg_cli_parse_real(const char *cmd, const char *name, const char *text, int percent, double *value);
/* Whether count (of option name: --microbatches, --micro-batch) divides
 * --batch batch into equal parts. Prints why not, with the divisors of
 * batch to choose from, and returns 0; 1 otherwise. */
int brg_cli_check_divides(const char *cmd, const char *name, int64_t count, int64_t batch);
/* A comma list for option name ("4,8,16"): each item to take(ctx, item),
 * which prints why an item is wrong and returns 0. A malformed list gets
 * "NAME 'TEXT': expected <expected>". Returns 1 when every item was taken. */
int brg_cli_parse_list(const char *cmd, const char *name, const char *text, const char *expected, void *ctx,
                       int (*take)(void *ctx, const char *item));

/* Synthetic data (synthetic.c): sample `index` of the data set that seed
 * makes, `sample` floats in [0, 1) and a label in [0, classes); the same
 * index always gives the same sample. brg_cli_synth_batch makes samples
 * 0 .. n - 1 with `pixels` labels each (a model's brg_model_label_count:
 * a per-pixel model gets a label map that is the sample's class at every
 * pixel). brg_cli_mix64 is the hash behind them (splitmix64's
 * finalizer). */
uint64_t brg_cli_mix64(uint64_t z);
void brg_cli_synth_sample(uint64_t seed, uint64_t index, int64_t sample, int classes, float *image, int32_t *label);
void brg_cli_synth_batch(uint64_t seed, int64_t n, int64_t sample, int classes, int64_t pixels, float *images,
                         int32_t *labels);

#endif /* BRIGADE_CLI_LIB_H */

/* brigade command line: one function per subcommand.
 * Each takes the arguments after the subcommand name (argv[0] is the
 * subcommand itself, as for getopt) and returns the process exit code:
 * 0 success, 1 the work failed (a check failed, out of memory, bad data),
 * 2 the command line was wrong. Messages go to stderr, results to stdout. */
#ifndef BRIGADE_CLI_H
#define BRIGADE_CLI_H

#include <stdio.h>

#include "brigade.h"

#define BRG_EXIT_OK 0
#define BRG_EXIT_FAILURE 1
#define BRG_EXIT_USAGE 2

int brg_cmd_info(int argc, char **argv);
int brg_cmd_selfcheck(int argc, char **argv);
int brg_cmd_model(int argc, char **argv); /* model list | summary | export */
int brg_cmd_train(int argc, char **argv);
int brg_cmd_plan(int argc, char **argv);
int brg_cmd_bench(int argc, char **argv);

/* MODEL arguments (model_arg.c): a zoo name or a JSON model file.
 * Parse "CxHxW" (or "HxW", keeping the channels) into options. */
brg_status brg_cli_parse_input(const char *text, brg_zoo_options *options);
/* Build or load the model. Options (from --input, --classes, --width-mult)
 * apply to zoo models; given with a file, they are an error. */
brg_status brg_cli_load_model(const char *spec, const brg_zoo_options *options, int options_given,
                              brg_model **out);

/* Print "brigade: <what>: <last error>" to stderr and return BRG_EXIT_FAILURE
 * (BRG_EXIT_USAGE for BRG_ERR_INVALID_ARGUMENT). */
int brg_cli_fail(const char *what, brg_status status);

#endif /* BRIGADE_CLI_H */

/* brigade: the command line entry point; dispatches to subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", brg_cmd_info, "show backends, devices and library versions"},
    {"selfcheck", brg_cmd_selfcheck, "check every kernel against the reference and finite differences"},
    {"model", brg_cmd_model, "list the zoo, summarize or export a model"},
    {"plan", brg_cmd_plan, "plan what each device will hold, without running anything"},
    {"train", brg_cmd_train, "train a model on capped devices"},
    {"eval", brg_cmd_eval, "loss, top-1 and top-5 accuracy of a model's weights on the test set"},
    {"data", brg_cmd_data, "look at image folders, export Fashion-MNIST as PNG, measure decoding"},
    {"bench", brg_cmd_bench, "measure and simulate pipeline schedules, with timelines"},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: brigade [--version] [--help] COMMAND [ARGS]\n"
            "\n"
            "Pipeline-parallel training for convolutional networks larger than one GPU.\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'brigade COMMAND --help' describes a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return BRG_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return BRG_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("brigade %s\n", brg_version());
        return BRG_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "brigade: unknown command '%s'\n\n", name);
    usage(stderr);
    return BRG_EXIT_USAGE;
}

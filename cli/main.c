/* brigade: the command line entry point; dispatches to subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/distributed.h"
#include "cli.h"

/* The ranks of an mpirun launch (a world of one otherwise). */
brg_world *brg_cli_world = NULL;
int brg_cli_exit_agreed = 0;

int brg_cli_parse_devices(const char *cmd, const char *text, brg_device_spec *specs, int max, int *count)
{
    if (brg_device_spec_parse(text, specs, max, count) != BRG_OK ||
        brg_world_expand_devices(brg_cli_world, specs, max, count) != BRG_OK) {
        fprintf(stderr, "brigade %s: --devices: %s\n", cmd, brg_last_error());
        return 0;
    }
    return 1;
}

int brg_cli_check_devices_here(const char *cmd, const brg_world *world, const brg_device_spec *specs, int n)
{
    for (int d = 0; d < n; d++) {
        if (!brg_world_holds(world, d, n)) continue; /* another rank's */
        brg_device_spec mine;
        brg_world_device_spec(brg_cli_world, &specs[d], &mine);
        if (brg_device_spec_check_here(&mine) != BRG_OK) {
            fprintf(stderr, "brigade %s: --devices: %s\n", cmd, brg_last_error());
            return 0;
        }
    }
    return 1;
}

brg_status brg_cli_device_create(const brg_device_spec *spec, int index, brg_device **out)
{
    brg_device_spec mine;
    brg_world_device_spec(brg_cli_world, spec, &mine);
    const brg_status st = brg_device_create(&mine, index, out);
    if (st != BRG_OK && spec->gpu == BRG_GPU_LOCAL) /* before the caller's message, which says what failed */
        fprintf(stderr, "brigade: rank %d: its cuda:local is GPU %d, its local rank on the node\n",
                brg_world_rank(brg_cli_world), mine.gpu);
    return st;
}

int brg_cli_ranks_agree_line(const char *cmd, int argc, char **argv)
{
    if (brg_world_size(brg_cli_world) < 2) return -1;
    size_t n = 0;
    for (int i = 0; i < argc; i++) n += strlen(argv[i]) + 1;
    char *line = malloc(n + 1);
    if (!line) {
        fprintf(stderr, "brigade %s: out of host memory\n", cmd);
        return BRG_EXIT_FAILURE;
    }
    size_t at = 0;
    for (int i = 0; i < argc; i++) {
        memcpy(line + at, argv[i], strlen(argv[i]) + 1); /* with its NUL: "a b" is not "a", "b" */
        at += strlen(argv[i]) + 1;
    }
    const brg_status st = brg_world_agree(brg_cli_world, line, at, "the command line");
    free(line);
    if (st == BRG_OK) return -1;
    if (brg_world_rank(brg_cli_world) == 0) brg_cli_fail(cmd, st);
    brg_cli_exit_agreed = 1; /* every rank saw the same hashes */
    return BRG_EXIT_USAGE;
}

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

/* Seconds a failed rank waits for the others to end too before it ends
 * the job (well within the 10 s in which a failure must end every rank). */
#define END_WAIT 5.0

/* Under mpirun every rank runs the command; rank 0 alone prints to
 * standard output (progress, tables), and standard error has every rank's
 * errors, those every rank wrote alike once (rank_stderr.c). A rank that
 * fails alone ends the job: the others would wait for it forever. */
static int run_command(const command *c, int argc, char **argv)
{
    if (!brg_world_launched()) return c->run(argc - 1, argv + 1);
    if (strcmp(c->name, "train") != 0 && strcmp(c->name, "eval") != 0 && strcmp(c->name, "plan") != 0 &&
        strcmp(c->name, "bench") != 0) {
        fprintf(stderr, "brigade %s: runs in one process; under mpirun only train, eval, plan and bench span the "
                        "ranks (run brigade %s without mpirun)\n", c->name, c->name);
        return BRG_EXIT_USAGE;
    }
    if (brg_world_init(&argc, &argv, &brg_cli_world) != BRG_OK) {
        fprintf(stderr, "brigade %s: %s\n", c->name, brg_last_error());
        return BRG_EXIT_FAILURE;
    }
    if (brg_world_rank(brg_cli_world) != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "brigade %s: rank %d cannot quiet its standard output\n", c->name,
                brg_world_rank(brg_cli_world));
    }
    /* From the start, so that a rank stopped in the setup is told from a
     * slow one by the other ranks' watchdogs (watchdog.c). */
    if (brg_world_heartbeat_start(brg_cli_world) != BRG_OK)
        fprintf(stderr, "brigade %s: warning: %s: a stopped rank is caught only by the watchdog's limits\n", c->name,
                brg_last_error());
    brg_cli_stderr_hold();
    const int rc = c->run(argc - 1, argv + 1);
    fflush(stdout);
    /* A rank that fails alone ends the job (the others would wait for it);
     * an end that every rank reached together is an ordinary one: known
     * so where the ranks decided it together (brg_cli_exit_agreed), else
     * when every rank gets here within END_WAIT seconds (a refusal each
     * rank reaches by itself: bad options, a plan that does not fit). */
    if (rc != BRG_EXIT_OK && brg_world_size(brg_cli_world) > 1 && !brg_cli_exit_agreed &&
        !brg_world_end_together(brg_cli_world, rc, END_WAIT)) {
        char msg[96];
        snprintf(msg, sizeof msg, "brigade %s stopped with exit code %d; ending every rank", c->name, rc);
        brg_world_abort(brg_cli_world, rc, msg); /* what this rank held first (rank_stderr.c) */
    }
    brg_cli_stderr_compare(); /* every rank is here: what they all said is said once */
    brg_world_finalize(brg_cli_world);
    return rc;
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
    /* The library falls back to its default on a BRG_CPU_CONV or
     * BRG_CPU_LAYOUT it does not know; the command says so instead. */
    const char *conv = getenv("BRG_CPU_CONV");
    if (conv && brg_cpu_set_convolution(conv) != BRG_OK) {
        fprintf(stderr, "brigade: BRG_CPU_CONV=%s: %s\n", conv, brg_last_error());
        return BRG_EXIT_USAGE;
    }
    const char *layout = getenv("BRG_CPU_LAYOUT");
    if (layout && brg_cpu_set_layout(layout) != BRG_OK) {
        fprintf(stderr, "brigade: BRG_CPU_LAYOUT=%s: %s\n", layout, brg_last_error());
        return BRG_EXIT_USAGE;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0) return run_command(&commands[i], argc, argv);
    fprintf(stderr, "brigade: unknown command '%s'\n\n", name);
    usage(stderr);
    return BRG_EXIT_USAGE;
}

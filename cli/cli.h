/* brigade command line: one function per subcommand.
 * Each takes the arguments after the subcommand name (argv[0] is the
 * subcommand itself, as for getopt) and returns the process exit code:
 * 0 success, 1 the work failed (a check failed, out of memory, bad data),
 * 2 the command line was wrong. Messages go to stderr, results to stdout. */
#ifndef BRIGADE_CLI_H
#define BRIGADE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "brigade.h"
#include "cli-lib.h"

int brg_cmd_info(int argc, char **argv);
int brg_cmd_selfcheck(int argc, char **argv);
int brg_cmd_model(int argc, char **argv); /* model list | summary | export */
int brg_cmd_train(int argc, char **argv);
int brg_cmd_eval(int argc, char **argv);  /* in cmd_train.c: the same setup */
int brg_cmd_plan(int argc, char **argv);
int brg_cmd_bench(int argc, char **argv);
int brg_cmd_data(int argc, char **argv);  /* data info | export | bench */

/* The ranks of an mpirun launch: NULL, or set by main before train and plan
 * run (docs/distributed.md). */
extern brg_world *brg_cli_world;
/* Set when every rank ends the command with the same exit status at the
 * same point (a signal stop, a refusal all ranks agreed on): the job then
 * ends with MPI_Finalize, not MPI_Abort. */
extern int brg_cli_exit_agreed;

/* Under mpirun, cmd's command line (argc, argv) must be every rank's: a
 * rank with other options would plan or run otherwise, or wait for ever
 * (a collective call; train and eval compare option by option instead).
 * -1 to go on, else the exit code, rank 0 having said which ranks differ. */
int brg_cli_ranks_agree_line(const char *cmd, int argc, char **argv);

/* --devices for a command across the ranks: parsed, and "cuda:local" made
 * every rank's list (brg_world_expand_devices). 1, or 0 after printing why
 * not. */
int brg_cli_parse_devices(const char *cmd, const char *text, brg_device_spec *specs, int max, int *count);
/* The devices of n that this rank of world holds, checked against this
 * machine before a plan is made (brg_device_spec_check_here: a card larger
 * than its GPU). 1, or 0 after printing why not. */
int brg_cli_check_devices_here(const char *cmd, const brg_world *world, const brg_device_spec *specs, int n);
/* A device this rank holds: cuda:local resolved to this rank's GPU. */
brg_status brg_cli_device_create(const brg_device_spec *spec, int index, brg_device **out);

/* The watchdog of a job of several processes (watchdog.c): start ends the
 * job (brg_world_abort) once no progress has come for the longer of
 * seconds and, after the setup, ten times the longest gap between pets so
 * far; a setup phase may take setup_seconds (--watchdog-setup; 0: no
 * limit; negative: not given, an hour or seconds if longer); nothing in
 * one process or with seconds 0. phase: a setup phase begins, and the one
 * before it ended; name says what it does ("reading the data"), for the
 * message; begin: the setup ended, and the wait for the next pet is a
 * warm-up, not counted among the gaps (bench: at each combination); pet:
 * progress; stop ends the thread. start also runs the setup's
 * BRG_DEBUG_SLOW_SETUP wait, in one process too. check: 1 when the
 * command line's two limits go together, else 0 after saying why. */
void brg_cli_watchdog_start(const char *cmd, double seconds, double setup_seconds);
/* --watchdog S or --watchdog-setup S (option): S in seconds, 0 to a week;
 * 1, or 0 after saying what was wrong. */
int brg_cli_watchdog_parse(const char *cmd, const char *option, const char *text, int64_t *seconds);
int brg_cli_watchdog_check(const char *cmd, int64_t seconds, int64_t setup_seconds);
void brg_cli_watchdog_phase(const char *name);
void brg_cli_watchdog_begin(void);
void brg_cli_watchdog_pet(void);
void brg_cli_watchdog_stop(void);

/* Standard error under mpirun (rank_stderr.c). hold, at the start: ranks
 * other than 0 keep what they write, rank 0 writes it and keeps a copy.
 * compare, where every rank comes together (the setup's end, or the
 * command's): rank 0's held text goes to every rank, a line rank 0 wrote
 * too is dropped, any other printed headed "rank N: ", and from then on
 * every rank writes its own.
 * release: print what this rank holds, before it ends the job alone
 * (brg_world_abort calls it first).
 * signalled: for a handler of SIGTERM, which may end the rank (another
 * rank's abort, SIGKILL a second later): prints what this rank holds and
 * has not printed, headed with its rank, and holds on. Async-signal-safe;
 * 0 when it could not (the hold is ending, or being printed elsewhere).
 * While a rank other than 0 holds, a SIGTERM with no handler of its own
 * has one that calls it, then ends the process.
 * Nothing in one process. */
void brg_cli_stderr_hold(void);
void brg_cli_stderr_compare(void);
void brg_cli_stderr_release(void);
int brg_cli_stderr_signalled(void);

#endif /* BRIGADE_CLI_H */

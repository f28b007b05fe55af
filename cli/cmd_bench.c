/* brigade bench (being written). */
#include <stdio.h>

#include "cli.h"

int brg_cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brigade bench: not written yet\n");
    return BRG_EXIT_FAILURE;
}

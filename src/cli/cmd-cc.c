/* memlens cc: placeholder until the subcommand lands from its branch. */
#include "cli/cli.h"

int cmd_cc(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    die("'cc' is under construction in this build");
}

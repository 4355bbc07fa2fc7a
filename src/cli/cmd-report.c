/* memlens report: placeholder until the subcommand lands from its branch. */
#include "cli/cli.h"

int cmd_report(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    die("'report' is under construction in this build");
}

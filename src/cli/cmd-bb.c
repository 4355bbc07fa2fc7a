/* memlens bb: placeholder until the subcommand lands from its branch. */
#include "cli/cli.h"

int cmd_bb(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    die("'bb' is under construction in this build");
}

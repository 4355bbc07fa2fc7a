/* sharing builds leave out loads of variables whose address is never taken (profile-sharing.sh):
 * at -O0 the loads of s, i and r are such, the 10 x 1000 loads of g are not. */
#include <stdio.h>

long g[1000];

static void add(long *to, long v)
{
    *to += v;
}

int main(void)
{
    long s = 0, t = 0; /* t's address is taken: its loads stay */
    for (int i = 0; i < 1000; i++)
        g[i] = i;
    for (int r = 0; r < 10; r++)
        for (int i = 0; i < 1000; i++)
            s += g[i];
    add(&t, s);
    printf("%ld %ld\n", s, t);
    return 0;
}

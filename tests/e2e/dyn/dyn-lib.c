/* Another file (another module without whole-program mode): calls its argument. */
void apply(long *a, long n, void (*f)(long *, long))
{
    f(a, n);
}

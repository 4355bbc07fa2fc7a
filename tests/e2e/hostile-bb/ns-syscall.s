# mkdir by its own syscall instruction
# expect: unsupported
# detail: seccomp
# options: --no-static-check
@MKDIRARGS@
syscall

# mkdir by jumping to each syscall instruction of the stub (one block per instruction)
# expect: unsupported crashed
# options: --no-static-check
@MKDIRARGS@
movabs $@SYSCALL@, %rcx
jmp *%rcx

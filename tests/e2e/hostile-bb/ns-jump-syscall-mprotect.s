# mprotect(stub, 4096, rwx) by jumping to each syscall instruction of the stub
# expect: unsupported crashed
# options: --no-static-check
movabs $@STUB@, %rdi
mov $4096, %esi
mov $7, %edx
mov $10, %eax
movabs $@SYSCALL@, %rcx
jmp *%rcx

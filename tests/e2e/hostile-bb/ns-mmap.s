# mmap(stub, 4096, rwx, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED) at the gadget (the syscall the
# harness injects itself: it runs only when the harness made it)
# expect: unsupported
# detail: seccomp
# options: --no-static-check
movabs $@STUB@, %rdi
mov $4096, %esi
mov $7, %edx
mov $0x32, %r10d
mov $-1, %r8
xor %r9d, %r9d
mov $9, %eax
movabs $@GADGET@, %rcx
jmp *%rcx

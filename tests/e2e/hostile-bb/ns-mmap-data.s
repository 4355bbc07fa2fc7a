# the injected mmap exactly, data fd included (fd 3 and up), over the stub's page
# expect: unsupported
# detail: seccomp
# options: --no-static-check
movabs $@STUB@, %rdi
mov $4096, %esi
mov $3, %edx
mov $0x11, %r10d
mov $3, %r8d
xor %r9d, %r9d
mov $9, %eax
movabs $@GADGET@, %rcx
jmp *%rcx

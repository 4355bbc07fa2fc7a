# munmap of the control page at the gadget
# expect: unsupported
# detail: seccomp
# options: --no-static-check
movabs $@CTL@, %rdi
mov $4096, %esi
mov $11, %eax
movabs $@GADGET@, %rcx
jmp *%rcx

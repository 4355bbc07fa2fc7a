# clone(SIGCHLD) at the gadget
# expect: unsupported
# detail: seccomp
# options: --no-static-check
mov $17, %edi
xor %esi, %esi
xor %edx, %edx
xor %r10d, %r10d
mov $56, %eax
movabs $@GADGET@, %rcx
jmp *%rcx

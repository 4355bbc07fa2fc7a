# fork at the gadget
# expect: unsupported
# detail: seccomp
# options: --no-static-check
mov $57, %eax
movabs $@GADGET@, %rcx
jmp *%rcx

# mkdir by jumping to the gadget's address of memlens before the fix (0x4a00000003ef)
# expect: unsupported crashed ok unclean timeout
# options: --no-static-check --timeout 300
@MKDIRARGS@
movabs $0x4a00000003ef, %rcx
jmp *%rcx

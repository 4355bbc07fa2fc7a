# branch-free: overwrites the stub's code
# expect: crashed
# detail: access violation
movabs $@STUB@, %rax
movq $0, 0x100(%rax)

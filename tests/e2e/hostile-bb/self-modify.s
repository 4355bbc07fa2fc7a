# branch-free: rewrites its own code
# expect: crashed
# detail: access violation
lea 0(%rip), %rax
movb $0x90, 8(%rax)

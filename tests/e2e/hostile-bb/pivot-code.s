# stack pivot onto its own code
# expect: crashed
lea 0(%rip), %rsp
push %rax

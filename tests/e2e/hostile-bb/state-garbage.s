# branch-free: the whole state page, results included, filled with all-ones: the harness
# reads back nothing it trusts (a figure of any value, never a crash or a hang)
# expect: ok unclean crashed timeout
# options: --timeout 300
movabs $@STATE@, %rdi
mov $-1, %rax
mov $8192, %ecx
cld
rep stosq

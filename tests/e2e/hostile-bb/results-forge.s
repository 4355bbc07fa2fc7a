# branch-free: forges every result slot (times, context switches, faults) after the stub wrote them
# expect: ok unclean crashed timeout
movabs $@RES@, %rdi
mov $0x7fffffffffff, %rax
mov $4096, %ecx
cld
rep stosq

# branch-free: loop counters of the state page set to 1 (pass count, repetition, job)
# expect: ok unclean crashed timeout
# options: --timeout 300
movabs $@STATE@, %rdi
mov $1, %eax
mov $3, %ecx
cld
rep stosq

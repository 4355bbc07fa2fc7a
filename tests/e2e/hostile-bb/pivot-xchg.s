# stack pivot by xchg onto the data pages
# expect: ok unclean crashed
xchg %rsp, %rax
push %rbx
pop %rcx

# stack pivot into the writable state page, over the stub's few bytes of stack
# expect: ok unclean crashed timeout
movabs $@STATE@, %rsp
add $0x3f8, %rsp
push %rax
push %rax
pop %rbx

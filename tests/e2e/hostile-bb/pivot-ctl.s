# stack pivot into the read-only control page
# expect: crashed
# detail: access violation
movabs $@CTL@, %rsp
add $0x800, %rsp
push %rax

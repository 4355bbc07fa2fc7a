# corrupts the loop state, then jumps back into the stub's run loop
# expect: ok unclean crashed unsupported timeout
# options: --no-static-check --timeout 300
movabs $@STATE@, %rdi
movq $7, 8(%rdi)
movq $1, 16(%rdi)
movabs $@RUN@, %rcx
jmp *%rcx

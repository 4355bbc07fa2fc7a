# jumps to the stub's entry, which unmaps and installs the filter: not twice
# expect: unsupported
# detail: seccomp
# options: --no-static-check
movabs $@STUB@, %rcx
jmp *%rcx

# calls the legacy vsyscall page (gettimeofday), which no unmapping removes
# expect: unsupported crashed
# options: --no-static-check
movabs $0xffffffffff600000, %rcx
call *%rcx

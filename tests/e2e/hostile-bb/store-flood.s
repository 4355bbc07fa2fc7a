# branch-free endless store loop: 2^64 bytes from the data page upwards
# expect: crashed
# detail: fault limit
mov $-1, %rcx
cld
rep stosb

# the same without a fault limit: only the cpu-time limit ends it
# expect: timeout
# options: --max-faults 0 --timeout 300
mov $-1, %rcx
cld
rep stosb

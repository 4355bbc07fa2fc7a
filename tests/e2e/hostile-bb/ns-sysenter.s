# mkdir through sysenter (#UD in 64-bit mode on AMD, the i386 entry on Intel)
# expect: unsupported crashed
# options: --no-static-check
@MKDIRARGS@
mov %edi, %ebx
mov $0777, %ecx
mov $39, %eax
sysenter

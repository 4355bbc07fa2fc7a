# mkdir through the i386 entry (int $0x80: eax 39, ebx path, ecx mode)
# expect: unsupported
# detail: seccomp
# options: --no-static-check
@MKDIRARGS@
mov %edi, %ebx
mov $0777, %ecx
mov $39, %eax
int $0x80

# the issue's escape as any user: branch-free; fills the first words of the control page with
# the gadget address and sets the fill value (every register of the next pass) to 57, fork
# expect: crashed
movabs $@GADGET@, %rax
movabs $@CTL8@, %rdi
mov $31, %ecx
cld
rep stosq
movabs $@CTL@, %rdi
movq $57, (%rdi)

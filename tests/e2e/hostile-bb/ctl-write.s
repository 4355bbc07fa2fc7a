# the issue's escape: branch-free, passes the static check; fills the first words of the state
# page and of the control page with the gadget address, sets the fill value to 83 (mkdir) and
# puts a path at address 83 (page 0 maps as root), so that the next pass would run
# mkdir(83, 83) at the gadget
# expect: crashed
movabs $@GADGET@, %rax
movabs $@STATE@, %rdi
mov $32, %ecx
cld
rep stosq
@PATH83@
movabs $@GADGET@, %rax
movabs $@CTL8@, %rdi
mov $31, %ecx
rep stosq
movabs $@CTL@, %rdi
movq $83, (%rdi)

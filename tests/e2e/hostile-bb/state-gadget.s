# branch-free: fills the loop state, stack and first results of the writable state page with
# the gadget address, hoping the stub jumps there with registers the block chose
# expect: timeout crashed unsupported
# options: --timeout 300
@MKDIRARGS@
movabs $@GADGET@, %rax
movabs $@STATE@, %rdi
mov $128, %ecx
cld
rep stosq

# an endless loop
# expect: timeout
# options: --no-static-check --timeout 300
jmp .

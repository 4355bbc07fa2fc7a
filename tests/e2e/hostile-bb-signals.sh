#!/bin/bash
# memlens bb interrupted at random moments (SIGINT, SIGTERM, SIGHUP, SIGKILL within the first
# half second of a batch of short blocks, so that many land between a fork and the sandbox's
# first stop): no child may outlive memlens (before the fix one round in ten left the sandbox
# stopped forever, holding the caller's pipes), the caller's pipes reach EOF within 10 s, no
# temporary file stays next to the output, and the interrupted output resumes to the full
# corpus. ML_SEED repeats a run.
. "$(dirname "$0")/bb-lib.bash"
bb_require_ptrace
here=$(cd "$(dirname "$0")" && pwd)
python3 "$here/hostile-bb.py" signals "$ML" "${ML_ROUNDS:-40}" || fail "interrupted runs"

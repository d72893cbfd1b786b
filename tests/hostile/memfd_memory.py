# exercise: split-heads
# verdict: crash
# expect: File too large
# Round 7 (issue 34): memory in a file with no name on no disk (memfd_create(2)), written with write(2) and never
# mapped, so no address-space cap counts it: 1 GiB beside a 512 MiB cap. RLIMIT_FSIZE 0 holds for it as for
# any file (tests/exercises/test_sandbox_syscalls.py).
import os
fd = os.memfd_create("held")
for _ in range(64):
    os.write(fd, b"x" * (16 << 20))
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)

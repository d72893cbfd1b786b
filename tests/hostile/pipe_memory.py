# exercise: split-heads
# verdict: crash
# expect: Too many open files
# Round 5 (issue 34): what is written into a pipe is kernel memory in no address space; under the host's own
# limit on open files (20,000 on the machine this was found on, 524,288 where systemd sets it) 10,000 pipes of
# 4 KiB each held 39 MiB beside the cap, and passed. RLIMIT_NOFILE (confine.MAX_FILES) stops it at about 120.
import os
held = []
for n in range(10000):
    r, w = os.pipe()
    os.write(w, b"x" * 4096)
    held.append((r, w))
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)

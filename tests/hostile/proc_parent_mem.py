# exercise: split-heads
# verdict: crash
# expect: Error
# Read the parent's memory through /proc (the PID namespace hides it; Landlock refuses it).
import os
with open(f"/proc/{os.getppid()}/mem", "rb") as fh:
    fh.seek(0x400000)
    fh.read(16)
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)

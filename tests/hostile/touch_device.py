# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
# Round 4: any writer of /dev/full may set its timestamps to now; the host's node changed.
import os
os.utime("/dev/full")
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)

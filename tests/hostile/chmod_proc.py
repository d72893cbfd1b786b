# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
# Round 4: chmod 000 of the sandbox's /proc made every later check of a grade "not checked".
import os
os.chmod("/proc", 0)
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)

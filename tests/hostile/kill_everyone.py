# exercise: split-heads
# verdict: crash
# expect: Operation not permitted
import os, signal
os.kill(-1, signal.SIGKILL)
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)

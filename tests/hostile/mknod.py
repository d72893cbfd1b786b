# exercise: split-heads
# verdict: crash
# expect: Error
import os, stat
os.mknod("/tmp/shapetrace-hostile-node", stat.S_IFREG | 0o600)
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)

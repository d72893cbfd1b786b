# exercise: split-heads
# verdict: crash
# expect: Error
from pathlib import Path
Path("/root/shapetrace-hostile.txt").write_text("x")
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)

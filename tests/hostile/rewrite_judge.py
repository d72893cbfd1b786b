# exercise: split-heads
# verdict: crash
# expect: No such file or directory
# The same trick on the judge's own source.
import torch
from pathlib import Path
import shapetrace.exercises.judge as judge
t = torch.from_file(judge.__file__, shared=True, size=16, dtype=torch.uint8)
t[:] = ord("#")
def split_heads(x, heads):
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, H, T, d_k)

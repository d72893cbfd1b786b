# exercise: split-heads
# verdict: wrong-values
# expect: strided
# Right on contiguous input, wrong on a tensor inside a wider buffer.
import torch
def split_heads(x, heads):
    B, T, D = x.shape
    d = D // heads
    return torch.as_strided(x, (B, heads, T, d), (T * D, d, D, 1))

# exercise: split-heads
# verdict: out-of-memory
# expect: memory
import torch
def split_heads(x, heads):
    big = torch.ones(8 * 2**30 // 4)
    return big

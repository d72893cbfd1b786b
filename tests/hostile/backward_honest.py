# exercise: head-backward
# verdict: pass
# expect: correct on all
# The control of the backward attacks (grads_*.py): one head's backward by hand, returned plainly.
import math
import torch
def head_backward(q, k, v, dy):
    p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)   # (T, T_k)
    dp = dy @ v.transpose(-2, -1)                                                   # (T, T_k)
    ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True)) / math.sqrt(q.shape[-1])    # (T, T_k)
    return ds @ k, ds.transpose(-2, -1) @ q, p.transpose(-2, -1) @ dy

# exercise: head-backward
# verdict: mutated-input
# expect: changed its input
# The right grads, then dy zeroed in place (a later backward step would read a zero grad).
import math
import torch
def head_backward(q, k, v, dy):
    p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)   # (T, T_k)
    dp = dy @ v.transpose(-2, -1)                                                   # (T, T_k)
    ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True)) / math.sqrt(q.shape[-1])    # (T, T_k)
    dv = p.transpose(-2, -1) @ dy                                                   # (T_k, d_k)
    dy.zero_()
    return ds @ k, ds.transpose(-2, -1) @ q, dv

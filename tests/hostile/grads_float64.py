# exercise: head-backward
# verdict: wrong-dtype
# expect: dtype is float64; expected float32
# The right grads in float64: the right values, not the parameter's dtype.
import math
import torch
def head_backward(q, k, v, dy):
    q, k, v, dy = (t.double() for t in (q, k, v, dy))
    p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)   # (T, T_k)
    dp = dy @ v.transpose(-2, -1)                                                   # (T, T_k)
    ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True)) / math.sqrt(q.shape[-1])    # (T, T_k)
    return ds @ k, ds.transpose(-2, -1) @ q, p.transpose(-2, -1) @ dy

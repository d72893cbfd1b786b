# exercise: head-backward
# verdict: wrong-values
# expect: NaN
# Every grad NaN: NaN is equal to nothing, so no comparison may treat it as a match.
import torch
def head_backward(q, k, v, dy):
    return tuple(torch.full_like(t, float("nan")) for t in (q, k, v))

# exercise: head-backward
# verdict: not-a-tensor
# expect: on the meta device, which the checker cannot read back
# Grads of the right shapes and dtype on the meta device: shapes without values.
import torch
def head_backward(q, k, v, dy):
    return tuple(torch.empty(t.shape, device="meta") for t in (q, k, v))

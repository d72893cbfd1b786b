# exercise: head-backward
# verdict: wrong-values
# expect: your dq is wrong
# Wrong grads (zeros) that require grad: the parent reads values, detached, never autograd's state.
import torch
def head_backward(q, k, v, dy):
    return tuple(torch.zeros_like(t).requires_grad_() for t in (q, k, v))

# exercise: head-backward
# verdict: uses-autograd
# expect: grad_fn MulBackward0
# Wrong grads (zeros) that carry a grad_fn, made with autograd back on.
import torch
def head_backward(q, k, v, dy):
    with torch.enable_grad():
        leaves = [torch.zeros_like(t).requires_grad_() for t in (q, k, v)]
        return tuple(t * 1 for t in leaves)

# exercise: head-backward
# verdict: wrong-shape
# expect: your dq has shape
# Grads of 2**62 elements each from one float (stride 0): the parent must compare them without
# allocating them.
import torch
def head_backward(q, k, v, dy):
    one = torch.zeros(())
    return tuple(one.expand(2**31, 2**31) for _ in range(3))

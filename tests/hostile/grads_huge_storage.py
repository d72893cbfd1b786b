# exercise: linear-backward
# verdict: not-a-tensor
# expect: of 268435456 bytes, which the checker cannot read back
# Grads of the right shapes that are views into a 256 MiB storage, more than the checker reads back.
import torch
def linear_backward(x, weight, dy):
    big = torch.zeros(2**26)
    dx = big[:x.numel()].view(x.shape)
    dW = big[-weight.numel():].view(weight.shape)
    return dx, dW

# exercise: linear-backward
# verdict: wrong-values
# expect: inf
# Infinite grads of the right shapes.
import torch
def linear_backward(x, weight, dy):
    return torch.full_like(x, float("inf")), torch.full_like(weight, float("-inf"))

"""Reference solution for linear-backward."""

import torch


def linear_backward(x, weight, dy):
    dx = dy @ weight                                       # (B, T, D_in): dY · W
    dy, x = dy.flatten(0, 1), x.flatten(0, 1)              # (B·T, D_out), (B·T, D_in)
    dW = dy.transpose(0, 1) @ x                            # (D_out, D_in): summed over B·T
    return dx, dW

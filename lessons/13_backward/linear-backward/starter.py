"""Exercise linear-backward: the grads of y = x @ weightᵀ (nn.Linear without its bias), by hand.

x [B, T, D_in], weight [D_out, D_in] (nn.Linear's layout), y and dy = dL/dy [B, T, D_out].
Return (dx, dW): dx [B, T, D_in], dW [D_out, D_in], the grads autograd would give.
Run `shapetrace exercise check linear-backward`.
"""

import torch


def linear_backward(x, weight, dy):
    dx = dy @ weight                                       # (B, T, D_in)
    dW = x.flatten(0, 1).transpose(0, 1) @ dy.flatten(0, 1)  # (D_in, D_out)?
    return dx, dW

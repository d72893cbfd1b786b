"""Exercise transpose-grad: the grad of a transpose, as autograd makes it.

The forward split the heads: y is x [B, T, H, d_k] with axes 1 and 2 swapped, [B, H, T, d_k].
Given dy = dL/dy [B, H, T, d_k], return dL/dx [B, T, H, d_k]: a view of dy (no data moved), as
autograd's TransposeBackward gives it. Run `shapetrace exercise check transpose-grad`.
"""

import torch


def transpose_backward(dy):
    B, H, T, d_k = dy.shape                                # (B, H, T, d_k)
    return dy.reshape(B, T, H, d_k)                        # (B, T, H, d_k)?

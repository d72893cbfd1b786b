# exercise: transpose-grad
# verdict: wrong-values
# expect: holds dy[
# A view of dy with dy.transpose(1, 2)'s shape whose strides overlap (as_strided): a view, not the grad.
import torch
def transpose_backward(dy):
    B, H, T, d_k = dy.shape
    return dy.as_strided((B, T, H, d_k), (d_k, d_k, 1, 1))

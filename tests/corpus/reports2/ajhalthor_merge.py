"""ajhalthor/Transformer-Neural-Network PR #4 (and issue #8, "permute before reshape"): the encoder's
``MultiHeadAttention`` projects ``x`` with one packed ``qkv_layer`` (``Linear(d, 3d)``), reshapes it to
``(B, T, H, 3·d_k)``, permutes to ``(B, H, T, 3·d_k)`` and ``chunk``s q, k, v on the last axis; after
``scaled_dot_product`` the values ``(B, H, T, d_k)`` were reshaped straight to ``(B, T, H·d_k)``: each output
token took head 0's values of H consecutive tokens. The fix permutes ``(0, 2, 1, 3)`` before the reshape.

Bug (argument): ``merge-no-permute``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("merge-no-permute",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def scaled_dot_product(q, k, v, mask=None):
    d_k = q.size()[-1]
    scaled = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d_k)        # (B, H, T, T)
    if mask is not None:
        scaled += mask
    attention = F.softmax(scaled, dim=-1)
    return torch.matmul(attention, v), attention                         # (B, H, T, d_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bug=""):
        super().__init__()
        self.d_model, self.num_heads, self.bug = d_model, num_heads, bug
        self.head_dim = d_model // num_heads
        self.qkv_layer = nn.Linear(d_model, 3 * d_model)
        self.linear_layer = nn.Linear(d_model, d_model)

    def forward(self, x, mask=None):
        batch_size, sequence_length, d_model = x.size()
        qkv = self.qkv_layer(x)                                              # (B, T, 3D)
        qkv = qkv.reshape(batch_size, sequence_length, self.num_heads, 3 * self.head_dim)
        qkv = qkv.permute(0, 2, 1, 3)                                        # (B, H, T, 3 d_k)
        q, k, v = qkv.chunk(3, dim=-1)                                       # (B, H, T, d_k)
        values, attention = scaled_dot_product(q, k, v, mask)
        if self.bug != "merge-no-permute":
            values = values.permute(0, 2, 1, 3)                              # (B, T, H, d_k)
        values = values.reshape(batch_size, sequence_length, self.num_heads * self.head_dim)
        return self.linear_layer(values)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MultiHeadAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

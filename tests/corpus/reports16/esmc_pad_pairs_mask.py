"""Biohub/esm issue #299 ("Bug in attention mask - currently ESM3 and ESMC pad tokens attend to each other"):
ESMC's ``MultiHeadAttention`` built its 4-D mask from the padding mask ``seq_id = tokens != pad`` as
``seq_id.unsqueeze(-1) == seq_id.unsqueeze(-2)``: two pads are "equal", so every pad query attended every other
pad (and only the pads), where it should attend nothing; the real tokens' rows are right, the pads' final states
are not. The issue's fix: ``seq_id[:, None, :, None] & seq_id[:, None, None, :]`` (a pad query's row all
hidden, which ``scaled_dot_product_attention`` returns as zeros).

The idiom (ESMC): ``layernorm_qkv`` (``LayerNorm`` then one ``Linear(D, 3D)``), ``chunk(3, -1)``, per-head
``q_ln``/``k_ln`` over the model width, ``view(B, L, H, d).transpose(1, 2)`` (ESM's ``rearrange``),
``F.scaled_dot_product_attention(q, k, v, mask_BHLL)``, merge, ``out_proj``; the second sequence padded by two.

Bug (argument): ``pads-equal``: the mask ``seq_id.unsqueeze(-1) == seq_id.unsqueeze(-2)``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("pads-equal",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.d_head, self.bug = n_heads, d_model // n_heads, bug
        self.layernorm_qkv = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, d_model * 3, bias=False))
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.q_ln, self.k_ln = nn.LayerNorm(d_model, bias=False), nn.LayerNorm(d_model, bias=False)

    def heads(self, x):
        return x.view(x.shape[0], x.shape[1], self.n_heads, self.d_head).transpose(1, 2)     # (B, H, L, d)

    def forward(self, x, seq_id):                                           # (B, L, D), (B, L) bool
        query_BLD, key_BLD, value_BLD = self.layernorm_qkv(x).chunk(3, dim=-1)
        query_BLD, key_BLD = self.q_ln(query_BLD), self.k_ln(key_BLD)
        if self.bug == "pads-equal":
            mask_BLL = seq_id.unsqueeze(-1) == seq_id.unsqueeze(-2)
            mask_BHLL = mask_BLL.unsqueeze(1)                                  # [mask]
        else:
            mask_BHLL = seq_id[:, None, :, None] & seq_id[:, None, None, :]    # [mask]
        context_BHLD = F.scaled_dot_product_attention(
            self.heads(query_BLD), self.heads(key_BLD), self.heads(value_BLD), mask_BHLL)
        context_BLD = context_BHLD.transpose(1, 2).reshape(x.shape)
        return self.out_proj(context_BLD)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    seq_id = torch.ones(B, T, dtype=torch.bool)
    seq_id[1, -2:] = False                                                      # the second sequence padded by two
    return MultiHeadAttention(D, H, bug).eval(), (torch.randn(B, T, D), seq_id)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""sooftware/attentions issue #4 ("Bug with mask?", open; dingjiansw101: "It seems the mask is not correct. Since
there is a permute of query, key, and value. The mask should also has a permute.", on attentions.py line 286,
``MultiHeadAttention.forward``): the heads are folded into the batch head-major (``permute(2, 0, 1, 3)`` then
``view(batch_size * num_heads, ...)``: row ``h * B + b``), but the mask is repeated batch-major
(``mask.unsqueeze(1).repeat(1, num_heads, 1, 1)``: row ``b * N + h``) and viewed to the scores' shape, so row
``h * B + b`` of the scores gets the mask of sequence ``(h * B + b) // N``, another sequence's padding.

The idiom: sooftware's ``MultiHeadAttention`` (``query_proj``/``key_proj``/``value_proj`` with bias, ``view(B,
-1, N, d)``, ``permute(2, 0, 1, 3).contiguous().view(B * N, -1, d)``, ``ScaledDotProductAttention`` with
``masked_fill_(mask.view(score.size()), -inf)`` and ``softmax(-1)``, the context ``view(N, B, -1, d)`` and
``permute(1, 2, 0, 3)`` back), over a padded batch whose ``mask`` ``[B, Q, K]`` is True on the padded keys.

Bug (order of the folded axis): ``mask-batch-major``: the issue's code; the fix repeats the mask head-major
(``mask.unsqueeze(0).repeat(N, 1, 1, 1)``), as the scores are laid out."""

import math
import sys

import torch
from torch import nn

BUGS = ("mask-batch-major",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class ScaledDotProductAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.sqrt_dim = math.sqrt(dim)

    def forward(self, query, key, value, mask=None):
        score = torch.bmm(query, key.transpose(1, 2)) / self.sqrt_dim
        if mask is not None:
            score.masked_fill_(mask.view(score.size()), -float("Inf"))
        attn = torch.softmax(score, -1)
        context = torch.bmm(attn, value)
        return context, attn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model=512, num_heads=8, bug=""):
        super().__init__()
        self.bug = bug
        self.d_head, self.num_heads = d_model // num_heads, num_heads
        self.scaled_dot_attn = ScaledDotProductAttention(self.d_head)
        self.query_proj = nn.Linear(d_model, self.d_head * num_heads)
        self.key_proj = nn.Linear(d_model, self.d_head * num_heads)
        self.value_proj = nn.Linear(d_model, self.d_head * num_heads)

    def forward(self, query, key, value, mask=None):
        batch_size = value.size(0)
        query = self.query_proj(query).view(batch_size, -1, self.num_heads, self.d_head)   # B x Q_LEN x N x D
        key = self.key_proj(key).view(batch_size, -1, self.num_heads, self.d_head)
        value = self.value_proj(value).view(batch_size, -1, self.num_heads, self.d_head)
        query = query.permute(2, 0, 1, 3).contiguous().view(batch_size * self.num_heads, -1, self.d_head)  # BN
        key = key.permute(2, 0, 1, 3).contiguous().view(batch_size * self.num_heads, -1, self.d_head)
        value = value.permute(2, 0, 1, 3).contiguous().view(batch_size * self.num_heads, -1, self.d_head)
        if mask is not None:
            if self.bug == "mask-batch-major":
                mask = mask.unsqueeze(1).repeat(1, self.num_heads, 1, 1)                # B x N x Q_LEN x K_LEN
            else:
                mask = mask.unsqueeze(0).repeat(self.num_heads, 1, 1, 1)                # N x B x Q_LEN x K_LEN
        context, attn = self.scaled_dot_attn(query, key, value, mask)
        context = context.view(self.num_heads, batch_size, -1, self.d_head)
        context = context.permute(1, 2, 0, 3).contiguous().view(batch_size, -1, self.num_heads * self.d_head)
        return context, attn


class Encoder(nn.Module):
    """One self-attention over a padded batch: the key padding mask ``[B, Q, K]`` built from the lengths."""

    def __init__(self, d_model, num_heads, bug=""):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, num_heads, bug=bug)

    def forward(self, inputs, input_lengths):
        T = inputs.size(1)
        pad = torch.arange(T)[None, :] >= input_lengths[:, None]                       # (B, K) True on pads
        mask = pad.unsqueeze(1).expand(-1, T, -1)                                       # (B, Q, K)
        context, _ = self.attention(inputs, inputs, inputs, mask)
        return context


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    lengths = torch.tensor([T, T - 2, T - 1, T - 3][:B])
    return Encoder(D, H, bug=bug).eval(), (torch.randn(B, T, D), lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

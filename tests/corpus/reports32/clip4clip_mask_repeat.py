"""ArrowLuo/CLIP4Clip issue #22 ("wrong masking for multi-head attention", fixed in the repository after the
reporter's pull request): the cross model's ``ResidualAttentionBlock`` gives ``nn.MultiheadAttention`` a 3-d
``attn_mask`` built with ``attn_mask.repeat(self.n_head, 1, 1)``, which tiles the batch, ``[M0, M1, M0, M1]``,
where the module reads entry ``b * n_head + h``, ``[M0, M0, M1, M1]``: head ``h`` of sample ``b`` gets another
sample's padding mask. The fix is ``attn_mask.repeat_interleave(self.n_head, dim=0)`` ("also recommended by
pytorch official"). At batch 1, or with one head, the two agree.

The idiom (CLIP4Clip's ``module_cross.py``, after CLIP): ``build_attention_mask`` turns the ``(N, L)`` 0/1 mask
into ``(1 - mask) * -1e6`` and expands it to ``(N, L, L)``; the tokens are permuted to ``(L, N, D)`` for the
sequence-first ``nn.MultiheadAttention``; each block is ``x + attn(ln_1(x))`` and ``x + mlp(ln_2(x))`` with a
quick-GELU MLP (``c_fc``, ``c_proj``); the output is permuted back to ``(N, L, D)``. The second video has two
padded frames at its end.

Bug (mask): ``mask-tiled``."""

import sys
from collections import OrderedDict

import torch
from torch import nn

BUGS = ("mask-tiled",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head, bug=""):
        super().__init__()
        self.bug, self.n_head = bug, n_head
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(OrderedDict([("c_fc", nn.Linear(d_model, d_model * 4)), ("gelu", QuickGELU()),
                                              ("c_proj", nn.Linear(d_model * 4, d_model))]))
        self.ln_2 = nn.LayerNorm(d_model)

    def attention(self, x, attn_mask):
        if self.bug == "mask-tiled":
            attn_mask_ = attn_mask.repeat(self.n_head, 1, 1)                          # (h·N, L, L)
        else:
            attn_mask_ = attn_mask.repeat_interleave(self.n_head, dim=0)              # (N·h, L, L)
        return self.attn(x, x, x, need_weights=False, attn_mask=attn_mask_)[0]

    def forward(self, para_tuple):
        x, attn_mask = para_tuple
        x = x + self.attention(self.ln_1(x), attn_mask)
        x = x + self.mlp(self.ln_2(x))
        return (x, attn_mask)


class CrossModel(nn.Module):
    def __init__(self, width, heads, layers=1, bug=""):
        super().__init__()
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads, bug=bug) for _ in range(layers)])

    def build_attention_mask(self, attention_mask):
        extended_attention_mask = attention_mask.unsqueeze(1)                          # (N, 1, L)
        extended_attention_mask = (1.0 - extended_attention_mask.float()) * -1000000.0
        return extended_attention_mask.expand(-1, attention_mask.size(1), -1)         # (N, L, L)

    def forward(self, concat_input, attention_mask):
        extended_attention_mask = self.build_attention_mask(attention_mask)
        x = concat_input.permute(1, 0, 2)                                              # (L, N, D)
        x = self.resblocks((x, extended_attention_mask))[0]
        return x.permute(1, 0, 2)                                                      # (N, L, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1:, T - 2:] = 0
    return CrossModel(D, H, bug=bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

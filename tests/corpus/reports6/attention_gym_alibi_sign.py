"""meta-pytorch/attention-gym PR #86 ("fix alibi bias", merged; also fixes issue #29): the FlexAttention
examples' ALiBi ``score_mod`` added ``alibi_bias[h] * (q_idx - kv_idx)`` to each score. Under the causal
``mask_mod`` (``q_idx >= kv_idx``) that distance is never negative, so the bias *grows* with distance: each
query favours the keys farthest from it, the opposite of ALiBi's linear penalty. The fix adds ``alibi_bias[h]
* (kv_idx - q_idx)``.

attention-gym's idiom: ``score_mod(score, b, h, q_idx, kv_idx)`` and ``mask_mod(b, h, q_idx, kv_idx)``
functions of the indices, checked against a dense reference that calls them on broadcast ``arange`` index
grids (``b[:, None, None, None]``, ``h[None, :, None, None]``, ``m[None, None, :, None]``, ``n[None, None,
None, :]``) and runs eager attention on the result; here that reference, with ``generate_alibi_bias(H)``'s
slopes ``exp2(-((h + 1) * 8 / H))`` and q, k, v from one ``qkv`` projection.

Bug (argument): ``alibi-q-minus-k``."""

import sys

import torch
from torch import nn

BUGS = ("alibi-q-minus-k",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def generate_alibi_bias(H):
    return torch.exp2(-((torch.arange(H) + 1) * 8.0 / H))                       # (H,)


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


class AlibiAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("alibi_bias", generate_alibi_bias(heads))

    def alibi(self, score, b, h, q_idx, kv_idx):
        if self.bug == "alibi-q-minus-k":
            bias = self.alibi_bias[h] * (q_idx - kv_idx)                          # [alibi]
        else:
            bias = self.alibi_bias[h] * (kv_idx - q_idx)                          # [alibi]
        return score + bias

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)   # (B, H, T, d)
        scores = q @ k.transpose(-2, -1) * (C // self.heads) ** -0.5              # (B, H, T, T)
        b, h, m, n = (torch.arange(s) for s in scores.shape)
        b, h, m, n = b[:, None, None, None], h[None, :, None, None], m[None, None, :, None], n[None, None, None, :]
        scores = self.alibi(scores, b, h, m, n)
        scores = scores.masked_fill(~causal_mask(b, h, m, n), float("-inf"))
        out = scores.softmax(dim=-1) @ v                                           # (B, H, T, d)
        return self.proj(out.transpose(1, 2).reshape(B, T, C))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return AlibiAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""baichuan-inc/Baichuan2-13B-Base, modeling_baichuan.py (``BaichuanAttention``, ``_get_interleave``,
``_gen_alibi_mask``; Baichuan-13B the same): one ``W_pack`` linear to ``3 * D``, ``proj.unflatten(-1, (3, D))
.unsqueeze(0).transpose(0, -2).squeeze(-2)`` into q, k, v; each ``view(B, T, H, d).transpose(1, 2)``; ALiBi
slopes from ``_get_interleave(H)`` (``2 ** (-8 / n)`` powers), ``alibi = slopes.unsqueeze(1).unsqueeze(1) *
torch.arange(T).unsqueeze(0).unsqueeze(0).expand(H, -1, -1)`` (``[H, 1, T]``, a bias by key position only:
softmax-equivalent to ``-slope * (i - j)`` on each row), plus a future mask ``_fill_with_neg_inf(zeros(T,
T)).triu(1)`` broadcast to ``[H, T, T]``; scores ``q @ k.T / sqrt(d)`` plus the mask, softmax, ``@ v``,
``transpose(1, 2).reshape(B, T, D)``, ``o_proj``.

Bugs (argument): ``alibi-slope-reversed``: the key positions counted from the end (``arange(T - 1, -1, -1)``:
the bias grows toward the first key, the direction of ALiBi reversed, a reported slip of ports that write
``i - j`` where ``j - i`` is meant); ``future-mask-transposed``: the future mask ``triu(1).transpose(0, 1)`` (the
lower triangle filled: each query sees only itself and later keys)."""

import math
import sys

import torch
from torch import nn


def _get_interleave(n):
    def _get_interleave_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return _get_interleave_power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return _get_interleave_power_of_2(closest) + _get_interleave(2 * closest)[0::2][: n - closest]


def _fill_with_neg_inf(t):
    return t.float().fill_(float("-inf")).type_as(t)


def _gen_alibi_mask(n_head, max_pos, bug=""):
    slopes = torch.Tensor(_get_interleave(n_head))
    positions = torch.arange(max_pos - 1, -1, -1) if bug == "alibi-slope-reversed" else torch.arange(max_pos)
    alibi = slopes.unsqueeze(1).unsqueeze(1) * positions.unsqueeze(0).unsqueeze(0).expand(n_head, -1, -1)
    alibi = alibi.view(n_head, 1, max_pos)
    future = torch.triu(_fill_with_neg_inf(torch.zeros([max_pos, max_pos])), 1)
    if bug == "future-mask-transposed":
        future = future.transpose(0, 1)
    return future.unsqueeze(0) + alibi                                           # (H, T, T)


class BaichuanAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.hidden_size, self.num_heads, self.head_dim, self.bug = dim, heads, dim // heads, bug
        self.W_pack = nn.Linear(dim, 3 * dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, hidden_states):                                            # (B, T, D)
        bsz, q_len, _ = hidden_states.size()
        proj = self.W_pack(hidden_states)
        proj = proj.unflatten(-1, (3, self.hidden_size)).unsqueeze(0).transpose(0, -2).squeeze(-2)
        q = proj[0].view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = proj[1].view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = proj[2].view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        mask = _gen_alibi_mask(self.num_heads, q_len, self.bug)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        attn_weights = torch.softmax(attn_weights + mask.unsqueeze(0), dim=-1)
        out = torch.matmul(attn_weights, v).transpose(1, 2).reshape(bsz, q_len, self.hidden_size)
        return self.o_proj(out)


BUGS = ("alibi-slope-reversed", "future-mask-transposed")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return BaichuanAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

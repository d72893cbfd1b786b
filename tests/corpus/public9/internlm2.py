"""InternLM/InternLM, model/modeling_internlm2.py (``InternLM2Attention.forward``;
https://github.com/InternLM/InternLM/blob/main/model/modeling_internlm2.py, as shipped with the
internlm2-chat checkpoints): one fused projection ``wqkv`` laid out per key/value head as (its n_rep
query heads, one key head, one value head), split with einops, ``rearrange(qkv, "b q (h gs d) -> b q h gs
d", gs=2 + self.num_key_value_groups, d=self.head_dim)``, the queries ``qkv[..., :num_key_value_groups, :]``
flattened ``"b q h gs d -> b q (h gs) d"``, the keys and values ``qkv[..., -2, :]`` and ``qkv[..., -1, :]``,
widened by ``repeat_kv``; eager attention with a causal mask.

Bugs (argument): ``gs-first``: the queries flattened ``"b q h gs d -> b q (gs h) d"`` (query head j no longer
belongs to key/value head j // n_rep); ``merge-no-transpose``: the output ``[B, H, T, d]`` reshaped to ``[B, T,
D]`` without its transpose."""

import sys

import torch
from einops import rearrange
from torch import nn

BUGS = ("gs-first", "merge-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def repeat_kv(x, n_rep):
    b, h_kv, t, d = x.shape
    x = x[:, :, None, :, :].expand(b, h_kv, n_rep, t, d)  # (B, H_kv, n_rep, T, d)
    return x.reshape(b, h_kv * n_rep, t, d)  # (B, H, T, d)


class InternLM2Attention(nn.Module):
    def __init__(self, d, h, h_kv, bug=""):
        super().__init__()
        self.h, self.h_kv, self.hd, self.bug = h, h_kv, d // h, bug
        self.groups = h // h_kv
        self.wqkv = nn.Linear(d, (h + 2 * h_kv) * self.hd, bias=False)
        self.wo = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        qkv = self.wqkv(x)  # (B, T, (H + 2·H_kv)·d)
        qkv = rearrange(qkv, "b q (h gs d) -> b q h gs d", gs=2 + self.groups, d=self.hd)  # (B, T, H_kv, n_rep+2, d)
        q = qkv[..., : self.groups, :]  # (B, T, H_kv, n_rep, d)
        flat = "b q h gs d -> b q (gs h) d" if self.bug == "gs-first" else "b q h gs d -> b q (h gs) d"
        q = rearrange(q, flat)  # (B, T, H, d)
        k, v = qkv[..., -2, :], qkv[..., -1, :]  # (B, T, H_kv, d)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H or H_kv, T, d)
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)  # (B, H, T, d)
        s = torch.matmul(q, k.transpose(2, 3)) / self.hd**0.5  # (B, H, T, T)
        causal = torch.full((T, T), float("-inf")).triu(1)  # (T, T)
        w = torch.softmax(s + causal, dim=-1)
        out = torch.matmul(w, v)  # (B, H, T, d)
        if self.bug != "merge-no-transpose":
            out = out.transpose(1, 2)  # (B, T, H, d)
        return self.wo(out.reshape(B, T, -1))  # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return InternLM2Attention(D, H, H_kv, bug), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)

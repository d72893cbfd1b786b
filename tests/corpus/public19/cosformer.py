"""OpenNLPLab/cosFormer, cosformer.py (``CosformerAttention``, commit of 2022): ``q, k, v`` projected from
``(T, B, D)``; ``relu`` feature maps on q and k; heads by ``view(T, B * H, d).transpose(0, 1)``; the reweighting
``sin/cos(pi / 2 * i / m)`` of each position, ``q_ = cat([q * sin, q * cos], dim=-1)`` (the same for k);
non-causal linear attention: ``kv_ = einsum('nld,nlm->ndm', k_, v)``, ``z_ = 1 / clamp_min(einsum('nld,nd->nl',
q_, k_.sum(dim=1)), eps)``, ``attn_output = einsum('nld,ndm,nl->nlm', q_, kv_, z_)``; back by ``transpose(0,
1).contiguous().view(T, B, D)``; ``out_proj``.

Bugs (argument): ``kv-summed-over-features``: ``einsum('nld,nlm->nlm', ...)`` the keys summed over their
features where the tokens are meant (the linear-attention slip of contracting the wrong axis); ``denominator-
over-features``: ``k_.sum(dim=2)`` (the normaliser summed per token, over the features: a ``[B·H, T]`` that the
einsum then reads as features)."""

import math
import sys

import torch
from torch import nn
from torch.nn import functional as F


class CosformerAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def get_index(self, seq_len):
        index = math.pi / 2 * torch.arange(1, seq_len + 1).reshape(1, -1, 1)
        return nn.Parameter(index, requires_grad=False)

    def forward(self, query, eps=1e-6):                                            # (T, B, D)
        tgt_len, bsz, embed_dim = query.size()
        head_dim = embed_dim // self.num_heads
        q = F.relu(self.q_proj(query))
        k = F.relu(self.k_proj(query))
        v = self.v_proj(query)
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, head_dim).transpose(0, 1)   # (B*H, T, d)
        k = k.contiguous().view(tgt_len, bsz * self.num_heads, head_dim).transpose(0, 1)
        v = v.contiguous().view(tgt_len, bsz * self.num_heads, head_dim).transpose(0, 1)
        m = tgt_len
        weight_index = self.get_index(m) / m                                         # (1, T, 1)
        q_ = torch.cat([q * torch.sin(weight_index), q * torch.cos(weight_index)], dim=-1)
        k_ = torch.cat([k * torch.sin(weight_index), k * torch.cos(weight_index)], dim=-1)
        if self.bug == "kv-summed-over-features":
            kv_ = torch.einsum("nld,nlm->nlm", k_, v)
            attn_output = q_[..., :head_dim] * kv_
        else:
            kv_ = torch.einsum("nld,nlm->ndm", k_, v)                                # (B*H, 2d, d)
            ksum = k_.sum(dim=2 if self.bug == "denominator-over-features" else 1)
            if self.bug == "denominator-over-features":
                z_ = 1 / torch.clamp_min(q_.sum(-1) * ksum, eps)
            else:
                z_ = 1 / torch.clamp_min(torch.einsum("nld,nd->nl", q_, ksum), eps)
            attn_output = torch.einsum("nld,ndm,nl->nlm", q_, kv_, z_)               # (B*H, T, d)
        attn_output = attn_output.transpose(0, 1).contiguous().view(tgt_len, bsz, -1)
        return self.out_proj(attn_output)


BUGS = ("kv-summed-over-features", "denominator-over-features")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return CosformerAttention(D, H, bug).eval(), (torch.randn(T, B, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

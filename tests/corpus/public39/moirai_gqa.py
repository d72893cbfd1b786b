"""SalesforceAIResearch/uni2ts, src/uni2ts/module/attention.py (v1.2, ``GroupedQueryAttention``) with
``position/attn_bias.py`` (``BinaryAttentionBias``): Moirai's attention over a flattened multivariate series
(each token one patch of one variate), ``q_proj`` of D and ``k_proj``/``v_proj`` of ``H_kv`` heads, einops
``rearrange(q, "... t (h d) -> ... h t d")``, per-head q/k norms over ``d``, the key/value heads widened by
``repeat(k, "... g t d -> ... (g r) t d", r=H // H_kv)``, a per-head binary bias from the variate ids (``ind =
variate_id[..., :, None] == variate_id[..., None, :]``, ``torch.where(ind, emb[1], emb[0])`` with the
``Embedding(2, H)`` weight ``rearrange``\\ d to ``two h 1 1``), the sample-id mask (``sample_id`` equal) filling
``-inf``, ``F.scaled_dot_product_attention`` with that additive bias, ``rearrange(out, "... h t d -> ... t (h
d)")``, ``out_proj``.

Bugs: ``kv-repeat-heads-outer``: ``repeat(k, "... g t d -> ... (r g) t d")`` (the key/value heads tiled: query
head ``i`` reads key/value head ``i % H_kv``; the GQA head-order slip, as einops' grouping order is easily
reversed); ``scale-by-model-width``: ``scaled_dot_product_attention(..., scale=D ** -0.5)`` (scaled by the model's
width instead of a head's: the slip of porting a single-head ``1/sqrt(d_model)``)."""

import sys

import torch
from einops import rearrange, repeat
from torch import nn
from torch.nn import functional as F


class BinaryAttentionBias(nn.Module):
    def __init__(self, num_heads):
        super().__init__()
        self.emb = nn.Embedding(2, num_heads)

    def forward(self, query_id, kv_id):
        ind = torch.eq(query_id.unsqueeze(-1), kv_id.unsqueeze(-2))        # [B, T, T]
        weight = rearrange(self.emb.weight, "two num_heads -> two num_heads 1 1")
        ind = rearrange(ind, "... q k -> ... 1 q k")                        # [B, 1, T, T]
        return torch.where(ind, weight[1:], weight[:1])                     # [B, H, T, T]


class GroupedQueryAttention(nn.Module):
    def __init__(self, dim, num_heads, num_groups, bug=""):
        super().__init__()
        self.dim, self.num_heads, self.num_groups, self.bug = dim, num_heads, num_groups, bug
        self.head_dim = dim // num_heads
        self.heads_per_group = num_heads // num_groups
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, self.head_dim * num_groups, bias=False)
        self.v_proj = nn.Linear(dim, self.head_dim * num_groups, bias=False)
        self.q_norm = nn.LayerNorm(self.head_dim)
        self.k_norm = nn.LayerNorm(self.head_dim)
        self.var_attn_bias = BinaryAttentionBias(num_heads)
        self.out_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x, sample_id, variate_id):
        query = rearrange(self.q_proj(x), "... t (h d) -> ... h t d", h=self.num_heads)
        key = rearrange(self.k_proj(x), "... t (g d) -> ... g t d", g=self.num_groups)
        value = rearrange(self.v_proj(x), "... t (g d) -> ... g t d", g=self.num_groups)
        query, key = self.q_norm(query), self.k_norm(key)
        pattern = "... g t d -> ... (r g) t d" if self.bug == "kv-repeat-heads-outer" else "... g t d -> ... (g r) t d"
        key = repeat(key, pattern, r=self.heads_per_group)
        value = repeat(value, pattern, r=self.heads_per_group)
        bias = self.var_attn_bias(variate_id, variate_id)
        same_sample = torch.eq(sample_id.unsqueeze(-1), sample_id.unsqueeze(-2)).unsqueeze(-3)   # [B, 1, T, T]
        bias = bias.masked_fill(~same_sample, float("-inf"))
        scale = self.dim ** -0.5 if self.bug == "scale-by-model-width" else None
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=bias, scale=scale)
        return self.out_proj(rearrange(out, "... h t d -> ... t (h d)"))


class MoiraiLayer(nn.Module):
    def __init__(self, dim, num_heads, num_groups, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.self_attn = GroupedQueryAttention(dim, num_heads, num_groups, bug)

    def forward(self, x, sample_id, variate_id):
        return x + self.self_attn(self.norm1(x), sample_id, variate_id)


BUGS = ("kv-repeat-heads-outer", "scale-by-model-width")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)
EQUAL = {"B=2 T=6 D=64 H=4 H_kv=2": "B=4 T=4 D=64 H=4 H_kv=2"}


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    """``T`` tokens: two variates of ``T // 2`` patches each, one sample per series."""
    torch.manual_seed(0)
    model = MoiraiLayer(D, H, H_kv, bug).eval()
    variate_id = (torch.arange(T) >= T // 2).long().expand(B, T)
    sample_id = torch.ones(B, T, dtype=torch.long)
    return model, (torch.randn(B, T, D), sample_id, variate_id)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

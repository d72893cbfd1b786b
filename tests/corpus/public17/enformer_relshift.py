"""lucidrains/enformer-pytorch, enformer_pytorch/modeling_enformer.py (v0.8, ``get_positional_features_exponential``,
``get_positional_features_central_mask``, ``get_positional_embed``, ``relative_shift``, ``Attention``), after
deepmind/deepmind-research enformer/attention_module.py: relative distances ``torch.arange(-seq_len + 1,
seq_len)``, basis functions of ``|distance|`` (exponential decays ``exp(-log 2 / half_life * |d|)`` with
``half_life = 2 ** linspace(min_half_life, log2(seq_len), n)``, central masks ``center_widths > |d|``; the gamma
basis left out here), ``cat((embeddings, sign(distances)[..., None] * embeddings), -1)`` ``(2T-1, F)``;
``to_q/k/v``, ``rearrange(t, 'b n (h d) -> b h n d')``, ``q * scale``, ``content_logits = einsum('b h i d, b h j
d -> b h i j', q + rel_content_bias, k)``, ``rel_k = rearrange(to_rel_k(positions), 'n (h d) -> h n d')``,
``rel_logits = einsum('b h i d, h j d -> b h i j', q + rel_pos_bias, rel_k)`` ``(B, H, T, 2T-1)`` and
``relative_shift`` (a zero column padded in front, ``reshape(-1, h, t2, t1)[:, :, 1:]``, ``reshape(-1, h, t1, t2
- 1)[..., :(t2 + 1) // 2]``) to ``(B, H, T, T)``; ``softmax``, ``einsum``, ``rearrange(out, 'b h n d -> b n (h
d)')``, ``to_out``.

Bugs (argument): ``rel-k-heads-last``: ``rearrange(rel_k, 'n (d h) -> h n d', h=heads)`` (the fold read in the
other order than ``to_rel_k``'s output is laid out); ``distances-reversed``: ``torch.arange(seq_len - 1,
-seq_len, -1)`` (distances counted key minus query where query minus key is meant: only the signed half of the
basis changes, no shape shows it)."""

import math
import sys

import torch
from einops import rearrange
from torch import einsum, nn


def get_positional_features_exponential(positions, features, seq_len, min_half_life=3.0):
    max_range = math.log(seq_len) / math.log(2.0)
    half_life = 2 ** torch.linspace(min_half_life, max_range, features)
    half_life = half_life[None, ...]
    positions = positions.abs()[..., None]
    return torch.exp(-math.log(2.0) / half_life * positions)


def get_positional_features_central_mask(positions, features, seq_len):
    center_widths = 2 ** torch.arange(1, features + 1).float()
    center_widths = center_widths - 1
    return (center_widths[None, ...] > positions.abs()[..., None]).float()


def get_positional_embed(seq_len, feature_size, bug=""):
    if bug == "distances-reversed":
        distances = torch.arange(seq_len - 1, -seq_len, -1)
    else:
        distances = torch.arange(-seq_len + 1, seq_len)                               # (2T-1,)
    feature_functions = [get_positional_features_exponential, get_positional_features_central_mask]
    num_components = len(feature_functions) * 2
    num_basis_per_class = feature_size // num_components
    embeddings = [fn(distances, num_basis_per_class, seq_len) for fn in feature_functions]
    embeddings = torch.cat(embeddings, dim=-1)
    return torch.cat((embeddings, torch.sign(distances)[..., None] * embeddings), dim=-1)   # (2T-1, F)


def relative_shift(x):                                                             # (B, H, T, 2T-1)
    to_pad = torch.zeros_like(x[..., :1])
    x = torch.cat((to_pad, x), dim=-1)
    _, h, t1, t2 = x.shape
    x = x.reshape(-1, h, t2, t1)
    x = x[:, :, 1:, :]
    x = x.reshape(-1, h, t1, t2 - 1)
    return x[..., : ((t2 + 1) // 2)]                                                 # (B, H, T, T)


class Attention(nn.Module):
    def __init__(self, dim, heads, dim_key, num_rel_pos_features, bug=""):
        super().__init__()
        self.scale, self.heads, self.bug = dim_key**-0.5, heads, bug
        self.to_q = nn.Linear(dim, dim_key * heads, bias=False)
        self.to_k = nn.Linear(dim, dim_key * heads, bias=False)
        self.to_v = nn.Linear(dim, dim_key * heads, bias=False)
        self.to_out = nn.Linear(dim_key * heads, dim)
        self.num_rel_pos_features = num_rel_pos_features
        self.to_rel_k = nn.Linear(num_rel_pos_features, dim_key * heads, bias=False)
        self.rel_content_bias = nn.Parameter(torch.randn(1, heads, 1, dim_key))
        self.rel_pos_bias = nn.Parameter(torch.randn(1, heads, 1, dim_key))

    def forward(self, x):                                                          # (B, T, D)
        n, h = x.shape[-2], self.heads
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=h) for t in (q, k, v))
        q = q * self.scale
        content_logits = einsum("b h i d, b h j d -> b h i j", q + self.rel_content_bias, k)
        positions = get_positional_embed(n, self.num_rel_pos_features, self.bug)
        rel_k = self.to_rel_k(positions)                                             # (2T-1, H*d)
        if self.bug == "rel-k-heads-last":
            rel_k = rearrange(rel_k, "n (d h) -> h n d", h=h)
        else:
            rel_k = rearrange(rel_k, "n (h d) -> h n d", h=h)
        rel_logits = einsum("b h i d, h j d -> b h i j", q + self.rel_pos_bias, rel_k)
        rel_logits = relative_shift(rel_logits)
        logits = content_logits + rel_logits
        attn = logits.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)
        out = rearrange(out, "b h n d -> b n (h d)")
        return self.to_out(out)


class Enformer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norms = nn.ModuleList([nn.LayerNorm(dim) for _ in range(2)])
        self.attns = nn.ModuleList([Attention(dim, heads, dim // heads, 8, bug) for _ in range(2)])

    def forward(self, x):                                                          # (B, T, D)
        for norm, attn in zip(self.norms, self.attns):
            x = x + attn(norm(x))
        return x


BUGS = ("rel-k-heads-last", "distances-reversed")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Enformer(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

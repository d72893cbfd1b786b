"""lucidrains/performer-pytorch, performer_pytorch/performer_pytorch.py (``softmax_kernel``,
``linear_attention``, ``causal_linear_attention_noncuda``, ``FastAttention``, ``Attention``;
https://github.com/lucidrains/performer-pytorch/blob/main/performer_pytorch/performer_pytorch.py): FAVOR+
positive random features, ``projection = repeat(projection_matrix, 'j d -> b h j d', b=b, h=h)``,
``data_dash = einsum('...id,...jd->...ij', data_normalizer * data, projection)``, ``diag_data =
(data ** 2).sum(dim=-1) / 2 * data_normalizer ** 2``, stabilised by ``amax(data_dash, dim=-1)`` for the
queries and ``amax(data_dash, dim=(-1, -2))`` for the keys (over keys and features: a constant per head);
non-causal ``linear_attention``: ``k_cumsum = k.sum(dim=-2)``, ``D_inv = 1. / einsum('...nd,...d->...n',
q, k_cumsum)``, ``context = einsum('...nd,...ne->...de', k, v)`` (keys contracted with values first), ``out
= einsum('...de,...nd,...n->...ne', context, q, D_inv)``; causal: ``k_cumsum = k.cumsum(dim=-2)``,
``context = einsum('...nd,...ne->...nde', k, v).cumsum(dim=-3)``; heads split and merged by
``rearrange(t, 'b n (h d) -> b h n d')`` / ``'b h n d -> b n (h d)'``.

Bugs (argument): ``heads-not-moved``: ``rearrange(t, 'b n (h d) -> b n h d')`` (the heads left beside the
features: every ``...n`` einsum then runs over the heads, so each token's heads attend to each other);
``causal-cumsum-features``: the causal context summed ``cumsum(dim=-2)`` over the random features of the
keys instead of ``dim=-3`` over the keys (each query reads every key, future included). Twin (correct):
``causal``: the prefix-sum (causal) path."""

import sys

import torch
from einops import rearrange, repeat
from torch import nn

BUGS = ("heads-not-moved", "causal-cumsum-features")
TWINS = ("causal",)
DIMS = ("B=2 T=6 D=32 H=4",)


def softmax_kernel(data, *, projection_matrix, is_query, normalize_data=True, eps=1e-4):
    b, h, *_ = data.shape
    data_normalizer = (data.shape[-1] ** -0.25) if normalize_data else 1.0
    ratio = projection_matrix.shape[0] ** -0.5
    projection = repeat(projection_matrix, "j d -> b h j d", b=b, h=h)
    projection = projection.type_as(data)
    data_dash = torch.einsum("...id,...jd->...ij", (data_normalizer * data), projection)  # (B, H, T, m)
    diag_data = data ** 2
    diag_data = torch.sum(diag_data, dim=-1)
    diag_data = (diag_data / 2.0) * (data_normalizer ** 2)
    diag_data = diag_data.unsqueeze(dim=-1)
    if is_query:
        data_dash = ratio * (
            torch.exp(data_dash - diag_data - torch.amax(data_dash, dim=-1, keepdim=True).detach()) + eps)
    else:
        data_dash = ratio * (
            torch.exp(data_dash - diag_data - torch.amax(data_dash, dim=(-1, -2), keepdim=True).detach()) + eps)
    return data_dash.type_as(data)


def linear_attention(q, k, v):
    k_cumsum = k.sum(dim=-2)
    D_inv = 1.0 / torch.einsum("...nd,...d->...n", q, k_cumsum.type_as(q))  # noqa: N806
    context = torch.einsum("...nd,...ne->...de", k, v)
    out = torch.einsum("...de,...nd,...n->...ne", context, q, D_inv)  # (B, H, T, d)
    return out


def causal_linear_attention_noncuda(q, k, v, eps=1e-6, bug=""):
    k_cumsum = k.cumsum(dim=-2)
    D_inv = 1.0 / torch.einsum("...nd,...nd->...n", q, k_cumsum.type_as(q) + eps)  # noqa: N806
    context = torch.einsum("...nd,...ne->...nde", k, v)
    context = context.cumsum(dim=-2 if bug == "causal-cumsum-features" else -3)  # (B, H, T, m, d)
    out = torch.einsum("...nde,...nd,...n->...ne", context, q, D_inv)  # (B, H, T, d)
    return out


class FastAttention(nn.Module):
    def __init__(self, dim_heads, nb_features=12, causal=False, bug=""):
        super().__init__()
        self.bug = bug
        self.causal = causal
        self.register_buffer("projection_matrix", torch.randn(nb_features, dim_heads))

    def forward(self, q, k, v):
        q = softmax_kernel(q, is_query=True, projection_matrix=self.projection_matrix)
        k = softmax_kernel(k, is_query=False, projection_matrix=self.projection_matrix)
        if self.causal:
            return causal_linear_attention_noncuda(q, k, v, bug=self.bug)
        return linear_attention(q, k, v)


class Attention(nn.Module):
    def __init__(self, dim=32, heads=4, causal=False, bug=""):
        super().__init__()
        self.bug = bug
        self.heads = heads
        dim_head = dim // heads
        self.fast_attention = FastAttention(dim_head, causal=causal, bug=bug)
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.heads
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        split = "b n (h d) -> b n h d" if self.bug == "heads-not-moved" else "b n (h d) -> b h n d"
        q, k, v = map(lambda t: rearrange(t, split, h=h), (q, k, v))  # (B, H, T, d)
        out = self.fast_attention(q, k, v)
        merge = "b n h d -> b n (h d)" if self.bug == "heads-not-moved" else "b h n d -> b n (h d)"
        out = rearrange(out, merge)  # (B, T, D)
        return self.to_out(out)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4': tokens (B, T, D); 12 random features per head."""
    torch.manual_seed(0)
    causal = bug in ("causal", "causal-cumsum-features")
    return Attention(D, H, causal=causal, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

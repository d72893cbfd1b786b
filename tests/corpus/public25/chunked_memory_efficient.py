"""lucidrains/memory-efficient-attention-pytorch, ``memory_efficient_attention_pytorch/memory_efficient_attention.py``
(v0.1.6, ``summarize_qkv_chunk``, ``memory_efficient_attention`` and ``Attention``, after Rabe & Staats'
"Self-attention Does Not Need O(n^2) Memory"): ``to_q``, ``to_kv``, ``rearrange('b n (h d) -> b h n d')``; ``q *
scale``; queries split into buckets of ``q_bucket_size`` and keys and values into buckets of ``k_bucket_size``
along the tokens (``split(..., dim=-2)``); per pair of buckets (a key bucket wholly after the query bucket skipped):
``einsum('b h i d, b h j d -> b h i j')``, the causal mask ``ones(q_chunk, k_chunk).triu(q_start - k_start + 1)``
filled with ``-finfo.max``, ``weight_max = weight.amax(dim=-1, keepdim=True)``, ``exp(weight - weight_max)``, the
weighted values ``einsum('b h i j, b h j d -> b h i d')`` and the sums ``exp_weight.sum(dim=-1)``; then across the
key buckets (stacked on a last axis): the global max, the renormalising factors ``exp(weight_maxes - global_max)``,
the values and weights summed and divided; the query buckets joined with ``cat(dim=-2)``; ``'b h n d -> b n (h
d)'``, ``to_out``.

Bugs: ``causal-offset-reversed``: ``triu(k_start - q_start + 1)`` (the offset taken from the key bucket's start,
the slip of a chunk offset computed from the wrong index; with buckets of 2 queries and 4 keys, the library's
ratio of 512 to 1024, the first query bucket then sees keys 2 and 3, its future, and the second hides every key);
``max-over-queries``: ``weight.amax(dim=-2, keepdim=True)`` (each key's maximum over the queries subtracted: a
shift per key, which the normalisation does not undo)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


def summarize_qkv_chunk(q, k, v, q_start, k_start, bug=""):
    weight = einsum('b h i d, b h j d -> b h i j', q, k)
    mask_value = -torch.finfo(weight.dtype).max
    if q_start < k_start + k.shape[-2] - 1:
        offset = k_start - q_start + 1 if bug == "causal-offset-reversed" else q_start - k_start + 1
        causal_mask = torch.ones((q.shape[-2], k.shape[-2]), dtype=torch.bool).triu(offset)
        weight = weight.masked_fill(causal_mask, mask_value)
    weight_max = weight.amax(dim=-2 if bug == "max-over-queries" else -1, keepdim=True).detach()
    exp_weight = (weight - weight_max).exp()
    weighted_value = einsum('b h i j, b h j d -> b h i d', exp_weight, v)
    if bug == "max-over-queries":
        weight_max = weight.amax(dim=-1, keepdim=True).detach()
    return exp_weight.sum(dim=-1), weighted_value, rearrange(weight_max, '... 1 -> ...')


def memory_efficient_attention(q, k, v, q_bucket_size, k_bucket_size, eps=1e-8, bug=""):
    q = q * q.shape[-1] ** -0.5
    k_chunks, v_chunks = k.split(k_bucket_size, dim=-2), v.split(k_bucket_size, dim=-2)
    out = []
    for q_index, q_chunk in enumerate(q.split(q_bucket_size, dim=-2)):
        exp_weights, weighted_values, weight_maxes = [], [], []
        for k_index, (k_chunk, v_chunk) in enumerate(zip(k_chunks, v_chunks)):
            q_start, k_start = q_index * q_bucket_size, k_index * k_bucket_size
            if k_start > q_start + q_chunk.shape[-2] - 1:
                continue
            exp_weight, weighted_value, weight_max = summarize_qkv_chunk(q_chunk, k_chunk, v_chunk, q_start,
                                                                         k_start, bug)
            exp_weights.append(exp_weight)
            weighted_values.append(weighted_value)
            weight_maxes.append(weight_max)
        weight_maxes = torch.stack(weight_maxes, dim=-1)
        weighted_values = torch.stack(weighted_values, dim=-1)
        exp_weights = torch.stack(exp_weights, dim=-1)
        global_max = weight_maxes.amax(dim=-1, keepdim=True)
        renorm_factor = (weight_maxes - global_max).exp().detach()
        exp_weights = exp_weights * renorm_factor
        weighted_values = weighted_values * rearrange(renorm_factor, '... c -> ... 1 c')
        all_values, all_weights = weighted_values.sum(dim=-1), exp_weights.sum(dim=-1)
        out.append(all_values / (rearrange(all_weights, '... -> ... 1') + eps))
    return torch.cat(out, dim=-2)


class Attention(nn.Module):
    def __init__(self, dim, heads, q_bucket_size=2, k_bucket_size=4, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.q_bucket_size, self.k_bucket_size = q_bucket_size, k_bucket_size
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim=-1))
        q, k, v = (rearrange(t, 'b n (h d) -> b h n d', h=self.heads) for t in (q, k, v))
        out = memory_efficient_attention(q, k, v, self.q_bucket_size, self.k_bucket_size, bug=self.bug)
        return self.to_out(rearrange(out, 'b h n d -> b n (h d)'))


BUGS = ("causal-offset-reversed", "max-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {"B=2 T=6 D=32 H=4": "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Attention(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

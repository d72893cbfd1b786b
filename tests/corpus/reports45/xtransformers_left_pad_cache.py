"""lucidrains/x-transformers issue #187 ("Bugs in generation with cache and seq_start_pos", closed): decoding with a
kv cache from left-padded prompts (``seq_start_pos``) went wrong in two ways the reporter lists (among four): (1)
``F.scaled_dot_product_attention``'s causal mask is aligned top-left (flash-attention v2.0 style), so "when cache is
enabled and len(q)=1 and len(k)=n, ``causal=True`` is inproperly mask out caches" (the fix: a causal mask aligned
bottom-right, ``ones(i, j).triu(j - i + 1)``, the query rows being the last ``i`` of the ``j`` positions); (3)
"The left_pad is fed into self-attn block as ``context_mask``. But in ``Attention``, ``context_mask`` is ignored due
to the absence of context": the padding is never masked (the fix passes it as the self-attention ``mask``).

The idiom (``x_transformers.py`` / ``attend.py`` of the time): ``to_q``/``to_k``/``to_v`` without bias,
``rearrange(t, 'b n (h d) -> b h n d', h = h)``, the cached keys and values joined on ``dim = -2``, ``input_mask =
context_mask if has_context else mask`` as ``rearrange(mask, 'b j -> b 1 1 j')``, the causal mask made with
``create_causal_mask(i, j)`` and combined ``mask & ~causal_mask`` for ``scaled_dot_product_attention`` (boolean,
True = attend), ``rearrange(out, 'b h n d -> b n (h d)')``, ``to_out``; ``AttentionLayers`` builds ``left_pad_mask
= seq_arange >= seq_start_pos[..., None]``; pre-norm blocks with a GELU feed-forward. A left-padded prompt of T
tokens, then one decoded token against the cache.

Bugs: ``left-pad-as-context-mask``: the padding handed to self-attention as ``context_mask`` (ignored; item 3);
``causal-top-left``: ``create_causal_mask`` as ``ones(i, j).triu(1)``, the alignment of SDPA's ``is_causal``
(item 1: the decoded token sees only the first key)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

BUGS = ("left-pad-as-context-mask", "causal-top-left")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class Attention(nn.Module):
    def __init__(self, dim, heads=4, causal=True, bug=""):
        super().__init__()
        self.heads, self.causal, self.bug = heads, causal, bug
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def create_causal_mask(self, i, j):
        if self.bug == "causal-top-left":
            return torch.ones((i, j), dtype=torch.bool).triu(1)
        return torch.ones((i, j), dtype=torch.bool).triu(j - i + 1)                    # (i, j), True = masked

    def forward(self, x, context=None, mask=None, context_mask=None, cache=None):      # (b, n, d)
        h, has_context = self.heads, context is not None
        kv_input = context if has_context else x
        q, k, v = self.to_q(x), self.to_k(kv_input), self.to_v(kv_input)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=h), (q, k, v))  # (b, h, n, d)
        if cache is not None:
            ck, cv = cache
            k, v = torch.cat((ck, k), dim=-2), torch.cat((cv, v), dim=-2)              # (b, h, j, d)
        input_mask = context_mask if has_context else mask
        i, j = q.shape[-2], k.shape[-2]
        attn_mask = torch.ones((1, 1, i, j), dtype=torch.bool)
        if input_mask is not None:
            attn_mask = attn_mask & rearrange(input_mask, 'b j -> b 1 1 j')            # (b, 1, 1, j)
        if self.causal:
            attn_mask = attn_mask & ~self.create_causal_mask(i, j)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)             # (b, h, i, d)
        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out), (k, v)


class Decoder(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.norm_attn, self.norm_ff, self.final_norm = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, causal=True, bug=bug)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def layer(self, x, left_pad_mask, cache=None):
        if self.bug == "left-pad-as-context-mask":
            out, new_cache = self.attn(self.norm_attn(x), context_mask=left_pad_mask, cache=cache)
        else:
            out, new_cache = self.attn(self.norm_attn(x), mask=left_pad_mask, cache=cache)
        x = x + out
        return x + self.ff(self.norm_ff(x)), new_cache

    def forward(self, prompt, seq_start_pos, token):                                   # (b, n, d), (b,), (b, 1, d)
        seq_arange = torch.arange(prompt.shape[-2])
        left_pad_mask = seq_arange >= seq_start_pos[..., None]                         # (b, n), True = keep
        x, cache = self.layer(prompt, left_pad_mask)
        step_mask = F.pad(left_pad_mask, (0, 1), value=True)                           # (b, n + 1)
        y, _ = self.layer(token, step_mask, cache)
        return self.final_norm(x), self.final_norm(y)


def build(bug="", B=2, T=6, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    seq_start_pos = torch.tensor([2 if b % 2 == 0 else 0 for b in range(B)])          # rows 0, 2, ... left-padded by 2
    return Decoder(D, H, bug).eval(), (torch.randn(B, T, D), seq_start_pos, torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

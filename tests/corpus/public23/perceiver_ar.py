"""lucidrains/perceiver-ar-pytorch, ``perceiver_ar_pytorch/perceiver_ar_pytorch.py`` (v0.0.10,
``CausalPrefixAttention``), the PyTorch port of google-research/perceiver-ar: the last ``N`` tokens of the
sequence are the queries (latents); the keys and values are the prefix (the first ``T - N`` tokens) followed by
the latents themselves; ``q = self.to_q(x)``, ``k, v = self.to_kv(cat((context, x), dim=-2)).chunk(2, dim=-1)``,
``rearrange(t, 'b n (h d) -> b h n d')``, ``sim = einsum('b h i d, b h j d -> b h i j', q, k) * scale``,
the causal mask offset by the prefix length ``ones((i, j)).triu(j - i + 1)`` (query ``i`` sees the whole
prefix and latents ``0..i``), ``masked_fill(mask, -finfo.max)``, ``softmax(dim=-1)``, ``to_out``.

Bugs: ``causal-mask-without-offset``: the mask written ``triu(1)`` as in a plain causal attention (the prefix
offset ``j - i`` forgotten: query ``i`` sees only the first ``i + 1`` prefix tokens, never the latents; the
slip the port's first issue about the prefix mask describes); ``merge-heads-without-permute``: the heads merged
with ``out.reshape(b, n, -1)`` straight from ``(b, h, n, d)`` (the einops ``'b h n d -> b n (h d)'`` replaced
by a reshape)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class CausalPrefixAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.scale = (dim // heads) ** -0.5
        self.norm, self.context_norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x, context):
        x, context = self.norm(x), self.context_norm(context)
        q = self.to_q(x)
        k, v = self.to_kv(torch.cat((context, x), dim=-2)).chunk(2, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in (q, k, v))
        sim = einsum("b h i d, b h j d -> b h i j", q * self.scale, k)
        i, j = sim.shape[-2:]
        offset = 1 if self.bug == "causal-mask-without-offset" else j - i + 1
        causal_mask = torch.ones((i, j), dtype=torch.bool).triu(offset)
        sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)
        attn = sim.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)
        if self.bug == "merge-heads-without-permute":
            out = out.reshape(out.shape[0], out.shape[2], -1)
        else:
            out = rearrange(out, "b h n d -> b n (h d)")
        return self.to_out(out)


class PerceiverAR(nn.Module):
    def __init__(self, vocab, dim, heads, latents, bug=""):
        super().__init__()
        self.latents = latents
        self.token_emb = nn.Embedding(vocab, dim)
        self.attn = CausalPrefixAttention(dim, heads, bug)
        self.to_logits = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.token_emb(tokens)
        prefix, x = x[:, : -self.latents], x[:, -self.latents :]
        x = self.attn(x, prefix) + x
        return self.to_logits(x)


BUGS = ("causal-mask-without-offset", "merge-heads-without-permute")
TWINS = ()
#: T: the whole sequence, N: the latents (the last N tokens)
DIMS = ("B=2 T=7 N=3 D=32 H=4",)


def build(bug="", B=2, T=7, N=3, D=32, H=4):
    torch.manual_seed(0)
    return PerceiverAR(50, D, H, N, bug).eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""Mikyx-1/TinyLLM issue #17 ("generate() produces garbage despite low train loss: prefill skips causal masking
when a KV cache is attached"), fixed by PR #18 (merged): ``MultiHeadAttention.forward`` applied its causal mask
only ``if cache is None``; ``generate()`` attaches the (empty) caches before the prefill, so the whole prompt was
scored without a mask and every prompt token saw the tokens after it, and that leak was written into the cache
every later step reads. The fix masks whenever more than one new token is scored, offset by the cached length.

The idiom: a ``qkv`` Linear split in three, ``view(B, T, H, d).transpose(1, 2)``, a registered ``tril`` buffer,
``masked_fill(-inf)``, softmax, ``transpose(1, 2).contiguous().view(B, T, D)``. The model runs a prefill of T
tokens with an empty cache attached, then one decoding step against the cache.

Bug (argument): ``mask-only-without-cache``: the prefill (cache attached, empty) is scored unmasked."""

import sys

import torch
from torch import nn

BUGS = ("mask-only-without-cache",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=64, bug=""):
        super().__init__()
        self.n_heads, self.head_dim, self.bug = n_heads, d_model // n_heads, bug
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("causal_mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x, cache):
        B, T_new, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q = q.view(B, T_new, self.n_heads, self.head_dim).transpose(1, 2)         # (B, H, T_new, d)
        k = k.view(B, T_new, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T_new, self.n_heads, self.head_dim).transpose(1, 2)
        past = cache["k"].shape[2]
        k = torch.cat([cache["k"], k], dim=2)                                      # (B, H, past+T_new, d)
        v = torch.cat([cache["v"], v], dim=2)
        cache["k"], cache["v"] = k, v
        scores = q @ k.transpose(-2, -1) / self.head_dim ** 0.5                    # (B, H, T_new, past+T_new)
        if self.bug != "mask-only-without-cache" and T_new > 1:
            mask = self.causal_mask[past:past + T_new, :past + T_new]              # (T_new, past+T_new)
            scores = scores.masked_fill(~mask, float("-inf"))                     # [mask]
        att = scores.softmax(dim=-1)
        out = (att @ v).transpose(1, 2).contiguous().view(B, T_new, D)             # (B, T_new, D)
        return self.proj(out)


class Generator(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, n_heads, bug=bug)

    def forward(self, prompt, step):
        B, H, d = prompt.shape[0], self.attn.n_heads, self.attn.head_dim
        cache = {"k": prompt.new_zeros(B, H, 0, d), "v": prompt.new_zeros(B, H, 0, d)}
        first = self.attn(prompt, cache)             # prefill with the cache attached: (B, T, D)
        last = self.attn(step, cache)                # one decoding step: (B, 1, D)
        return torch.cat([first, last], dim=1)       # (B, T+1, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Generator(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""pytorch/pytorch issue #144858 ("torch.nn.functional.scaled_dot_product_attention is_causal fails for kv-cache
case (sequential and further parallel attention)"; a second user: "I experienced the same issue and this fix
worked for me") and pytorch/executorch PR #21749 ("Fix off-graph KV-cache causal alignment: add explicit
masks", merged): ``F.scaled_dot_product_attention(..., is_causal=True)`` builds the *top-left* causal mask
``tril(ones(L, S))``; with a KV cache a decoding step scores one query against ``P + 1`` keys, and the
top-left mask keeps key 0 alone, so every generated token attends to the first prompt token only (the
user's "repeatedly producing the same vector"). A chunk of several new queries against the cache (the
executorch case) hides the whole history from the chunk's first query. The fix the issue converged on is an
explicit mask ``tril(ones(w, w, dtype=bool))[-h:, :]`` (w keys, h queries): the bottom-right causal mask,
all True for one query.

The idiom (a llama-style decoder as the issue's user wrote it): ``wq``/``wk``/``wv``/``wo``, ``view(B, T, H,
d).transpose(1, 2)``, the cache concatenated on the token axis of ``(B, H, P, d)``, SDPA, ``transpose(1,
2).reshape(B, T, D)``. The model runs a prefill of T tokens, then a chunk of three tokens, then one decoding
step against the cache.

Bugs (argument): ``is-causal-at-decode``: ``is_causal=True`` at every step (the prefill is right, the chunk and
the decoding step are top-left); ``is-causal-decode-only``: the chunk uses the explicit mask, the decoding
step ``is_causal=True``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("is-causal-at-decode", "is-causal-decode-only")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.head_dim, self.bug = n_heads, dim // n_heads, bug
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x, cache=None):
        bsz, seqlen, dim = x.shape
        q = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)   # (B, H, T, d)
        k = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)                                          # (B, H, P+T, d)
            v = torch.cat([cache[1], v], dim=2)
        total = k.shape[2]
        top_left = self.bug == "is-causal-at-decode" and cache is not None or \
            self.bug == "is-causal-decode-only" and seqlen == 1
        if cache is None or top_left:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)               # [sdpa]
        else:
            mask = torch.tril(torch.ones(total, total, dtype=torch.bool))[-seqlen:, :]   # (T, P+T)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)                # [sdpa]
        out = out.transpose(1, 2).reshape(bsz, seqlen, dim)                             # (B, T, D)
        return self.wo(out), (k, v)


class Decoder(nn.Module):
    def __init__(self, dim, n_heads, bug=""):
        super().__init__()
        self.attn = Attention(dim, n_heads, bug)

    def forward(self, prompt, chunk, step):
        _, cache = self.attn(prompt)                  # prefill: T tokens
        _, cache = self.attn(chunk, cache)            # three more tokens at once
        out, _ = self.attn(step, cache)               # one decoding step
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Decoder(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 3, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

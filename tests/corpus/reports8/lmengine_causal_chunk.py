"""open-lm-engine/lm-engine PR #498 (review thread on ``softmax_attention/module.py``, "Causal masking is
incorrect ... with cached key/value prefixes"): the SDPA call passed ``is_causal=self.causal`` whatever the
cache held; torch's ``is_causal`` is the *top-left* causal mask ``tril(ones(L, S))``, so a chunk of L new queries
against ``P + L`` cached and new keys kept query i on keys ``0..i`` only: the chunk lost most of its history.
The fix in the PR: ``is_causal=(self.causal and q.size(1) == k.size(1))``, and an explicit bottom-right mask
where the lengths differ.

The idiom: a fused ``c_attn`` Linear, ``[B, T, H, d]`` kept until SDPA (``transpose(1, 2)`` at the call), the
cache concatenated on the token axis of ``[B, T, H, d]``. The model runs a prefill of T tokens, then a chunk of
two tokens against the cache.

Bug (argument): ``is-causal-with-cache``: ``is_causal=True`` for the chunk (top-left)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("is-causal-with-cache",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, hidden_size // num_heads, bug
        self.c_attn = nn.Linear(hidden_size, 3 * hidden_size)
        self.c_proj = nn.Linear(hidden_size, hidden_size)

    def forward(self, x, past=None):
        b, s, _ = x.shape
        q, k, v = self.c_attn(x).view(b, s, 3, self.num_heads, self.head_dim).unbind(2)   # each (B, s, H, d)
        if past is not None:
            k = torch.cat([past[0], k], dim=1)                                             # (B, P+s, H, d)
            v = torch.cat([past[1], v], dim=1)
        if past is None or self.bug == "is-causal-with-cache":
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                 is_causal=True)                           # [sdpa]
        else:
            total = k.size(1)
            mask = torch.ones(s, total, dtype=torch.bool).tril(diagonal=total - s)         # (s, P+s)
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                 attn_mask=mask)                           # [sdpa]
        out = out.transpose(1, 2).reshape(b, s, -1)                                        # (B, s, D)
        return self.c_proj(out), (k, v)


class Model(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.attn = Attention(hidden_size, num_heads, bug)

    def forward(self, prompt, chunk):
        _, past = self.attn(prompt)
        out, _ = self.attn(chunk, past)
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Model(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 2, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers PR #41228 ("Fix sliding window attn mask", after issue #41184): continuous batching's
``build_attention_mask`` made the sliding window with ``masked = torch.tril(masked, diagonal=seqlen_k -
seqlen_q + sliding_window)`` on the causal ``-inf`` mask: ``tril`` zeroes what lies above that diagonal, and
above it lay only masked (future) entries, so the window masked none of the past and unmasked the keys more
than ``sliding_window`` steps in the future. The fix adds a second mask: ``masked += torch.tril(minus_inf,
diagonal=seqlen_k - seqlen_q - sliding_window)``.

The idiom: a Mistral-style layer (``view(B, T, H, d).transpose(1, 2)``, the additive mask ``[T, T]`` of
``-inf`` and 0 built by ``build_attention_mask``, ``softmax(-1, dtype=float32)``) with a sliding window of 2
over T = 6 tokens (the window smaller than the sequence, so the bug shows).

Bug (argument): ``window-by-tril-of-causal``: the window made by ``tril`` of the causal mask."""

import sys

import torch
from torch import nn

BUGS = ("window-by-tril-of-causal",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build_attention_mask(seqlen_q, seqlen_k, sliding_window, dtype, bug=""):
    minus_inf = torch.full((seqlen_q, seqlen_k), torch.finfo(dtype).min, dtype=dtype)
    masked = torch.triu(minus_inf, diagonal=seqlen_k - seqlen_q + 1)                   # (T, T): the future
    if sliding_window > 1:
        if bug == "window-by-tril-of-causal":
            masked = torch.tril(masked, diagonal=seqlen_k - seqlen_q + sliding_window)
        else:
            masked = masked + torch.tril(minus_inf, diagonal=seqlen_k - seqlen_q - sliding_window)
    return masked


class MistralAttention(nn.Module):
    def __init__(self, dim, heads, sliding_window=2, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.window, self.bug = heads, dim // heads, sliding_window, bug
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, hidden):                                                         # (B, T, D)
        b, t, _ = hidden.shape
        shape = (b, t, self.heads, self.head_dim)
        q = self.q_proj(hidden).view(shape).transpose(1, 2)                             # (B, H, T, d)
        k = self.k_proj(hidden).view(shape).transpose(1, 2)
        v = self.v_proj(hidden).view(shape).transpose(1, 2)
        mask = build_attention_mask(t, t, self.window, hidden.dtype, self.bug)
        w = torch.matmul(q, k.transpose(2, 3)) / self.head_dim ** 0.5 + mask           # (B, H, T, T)
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).reshape(b, t, -1)                      # (B, T, D)
        return self.o_proj(out)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MistralAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

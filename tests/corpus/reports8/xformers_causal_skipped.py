"""facebookresearch/xformers issue #103 ("[bug] Causal mask is skipped if no att_mask is passed", fixed by the
maintainer: "This was pretty wrong"): ``ScaledDotProduct.forward`` built its causal mask only inside ``if
att_mask is not None``, so a causal attention called without an explicit mask ran unmasked: each token attended
to the ones after it.

The idiom: ``ScaledDotProduct(causal=True)`` inside a multi-head wrapper that folds heads into the batch
(``[B·H, T, d]``), an additive mask from a cached ``tril``, ``bmm``; the decoder calls it without ``att_mask``.

Twin (argument): ``causal-only-with-mask``: with ``att_mask=None`` the causal mask is never built. A bug in the
report, a twin here: what torch records is a bidirectional encoder's self-attention (no cache, no mask, no
``is_causal``); ``causal=True`` is a Python attribute no op reads, so nothing recorded says the module meant to
be causal (as reports7's gemma4_bidirectional_all, the other way round)."""

import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("causal-only-with-mask",)
DIMS = ("B=2 T=6 D=32 H=4",)


class ScaledDotProduct(nn.Module):
    def __init__(self, causal=False, bug=""):
        super().__init__()
        self.causal, self.bug = causal, bug

    def forward(self, q, k, v, att_mask=None):
        seq = q.shape[-2]
        if self.causal and (att_mask is not None or self.bug != "causal-only-with-mask"):
            causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool))               # (T, T)
            att_mask = causal if att_mask is None else att_mask & causal
        att = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5                             # (B·H, T, T)
        if att_mask is not None:
            att = att.masked_fill(~att_mask, float("-inf"))                            # [mask]
        return torch.softmax(att, dim=-1) @ v                                          # (B·H, T, d)


class MultiHeadDispatch(nn.Module):
    def __init__(self, dim_model, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.dim_head = num_heads, dim_model // num_heads
        self.proj_q, self.proj_k, self.proj_v, self.proj = (nn.Linear(dim_model, dim_model) for _ in range(4))
        self.attention = ScaledDotProduct(causal=True, bug=bug)

    def fold_heads(self, t, B, S):
        return t.view(B, S, self.num_heads, self.dim_head).transpose(1, 2).flatten(0, 1)   # (B·H, T, d)

    def forward(self, x):
        B, S, E = x.shape
        q, k, v = (self.fold_heads(p(x), B, S) for p in (self.proj_q, self.proj_k, self.proj_v))
        y = self.attention(q, k, v)                                                    # no att_mask
        y = y.view(B, self.num_heads, S, self.dim_head).transpose(1, 2).flatten(2, 3)  # (B, T, D)
        return self.proj(y)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MultiHeadDispatch(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

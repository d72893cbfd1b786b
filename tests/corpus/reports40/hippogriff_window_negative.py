"""proger/hippogriff issue #7 ("sliding window attention bug?"): ``SlidingMQA.forward`` in hippogriff.py calls
``flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], causal=True, window_size=(-self.window_size, 0))``. flash-attn lets
query ``i`` attend keys ``[i - window_size[0], i + window_size[1]]`` and reads a negative extent as "no limit", so
the reporter found that "this configuration effectively implements global attention rather than sliding window
attention": every token attends to its whole causal prefix, and nothing fails. The report points to Mistral's
implementation (a non-negative left extent) for the right call.

The idiom (hippogriff.py, Griffin's local multi-query attention, with flash-attn's call written out in torch): ``q``
``Linear(dim, head_dim * q_heads)`` viewed ``(N, T, H, d)``, ``kv`` ``Linear(dim, 2 * head_dim * kv_heads)`` viewed
``(N, T, 2, H_kv, d)`` with one kv head, flash-attn's ``RotaryEmbedding`` (non-interleaved halves) on the queries
and, in place, on the keys (``kv[:, :, 0]``, as ``apply_rotary_emb_kv_``), the BTHD attention with the kv head
shared by every query head, ``x.view(N, T, C)`` and ``output``; the RMSNorm (``x / ||x|| * gamma / scale``)
pre-norm residual block with the gated MLP. Window 3 (a query sees itself and the two tokens before it).

Bugs (argument): ``negative-window``: the reported ``window_size=(-window, 0)`` (global causal attention);
``window-plus-one``: ``window_size=(window, 0)``, each query seeing window + 1 keys (the off-by-one of
huggingface/transformers issue #39408: flash-attn's left extent does not count the query itself)."""

import math
import sys

import torch
from torch import nn
from torch.nn.functional import gelu

BUGS = ("negative-window", "window-plus-one")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def flash_attn_func(q, k, v, causal=False, window_size=(-1, -1)):
    """flash-attn's semantics on (batch, seqlen, nheads, headdim) tensors; the kv heads are shared by the query
    heads (MQA/GQA); a negative extent of the window is no limit; the output is contiguous, as the kernel's."""
    n, t, h, d = q.shape
    s, h_kv = k.shape[1], k.shape[2]
    k = k.repeat_interleave(h // h_kv, dim=2)                                    # (N, S, H, d)
    v = v.repeat_interleave(h // h_kv, dim=2)                                    # (N, S, H, d)
    scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(d)                # (N, H, T, S)
    row = torch.arange(t)[:, None] + (s - t)                                     # (T, 1)
    col = torch.arange(s)[None, :]                                               # (1, S)
    allowed = torch.ones(t, s, dtype=torch.bool)
    if causal:
        allowed = allowed & (col <= row)
    left, right = window_size
    if left >= 0:
        allowed = allowed & (col >= row - left)
    if right >= 0:
        allowed = allowed & (col <= row + right)
    scores = scores.masked_fill(~allowed, float("-inf"))
    out = torch.einsum("bhts,bshd->bthd", scores.softmax(dim=-1), v)             # (N, T, H, d)
    return out.contiguous()


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim))

    def rotate(self, x, cos, sin):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    def forward(self, q, kv):
        t = q.shape[1]
        freqs = torch.outer(torch.arange(t, dtype=torch.float), self.inv_freq)      # (T, d/2)
        cos, sin = freqs.cos()[:, None, :], freqs.sin()[:, None, :]                 # (T, 1, d/2)
        kv[:, :, 0] = self.rotate(kv[:, :, 0], cos, sin)                            # (N, T, H_kv, d): in place
        return self.rotate(q, cos, sin), kv


class RMSNorm(nn.Module):
    def __init__(self, *, dim):
        super().__init__()
        self.scale = dim ** -0.5
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x = x / x.norm(p=2, dim=-1, keepdim=True)
        return self.gamma / self.scale * x


class SlidingMQA(nn.Module):
    def __init__(self, *, dim, head_dim, q_heads, kv_heads=1, window_size=3, bug=""):
        super().__init__()
        self.head_dim, self.window_size, self.bug = head_dim, window_size, bug
        self.rotary = RotaryEmbedding(dim=head_dim)
        self.q = nn.Linear(dim, head_dim * q_heads, bias=False)
        self.kv = nn.Linear(dim, 2 * head_dim * kv_heads, bias=False)
        self.output = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        N, T, C = x.shape
        q = self.q(x).view(N, T, -1, self.head_dim)                                 # (N, T, H, d)
        kv = self.kv(x).view(N, T, 2, -1, self.head_dim)                            # (N, T, 2, H_kv, d)
        q, kv = self.rotary(q, kv)
        if self.bug == "negative-window":
            window_size = (-self.window_size, 0)
        elif self.bug == "window-plus-one":
            window_size = (self.window_size, 0)
        else:
            window_size = (self.window_size - 1, 0)
        x = flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], causal=True, window_size=window_size)   # (N, T, H, d)
        x = x.view(N, T, C)                                                         # (N, T, D)
        return self.output(x)


class GatedMLP(nn.Module):
    def __init__(self, *, dim, expansion_factor=2):
        super().__init__()
        hidden = int(dim * expansion_factor)
        self.grow = nn.Linear(dim, 2 * hidden, bias=False)
        self.shrink = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        gate, x = self.grow(x).chunk(2, dim=-1)
        return self.shrink(gelu(gate) * x)


class GriffinAttentionBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.smqa_norm = RMSNorm(dim=dim)
        self.smqa = SlidingMQA(dim=dim, head_dim=dim // heads, q_heads=heads, bug=bug)
        self.smqa_gmlp_norm = RMSNorm(dim=dim)
        self.smqa_gmlp = GatedMLP(dim=dim)

    def forward(self, x):
        x = x + self.smqa(self.smqa_norm(x))
        return x + self.smqa_gmlp(self.smqa_gmlp_norm(x))


def build(bug="", B=2, T=5, D=32, H=4):
    torch.manual_seed(0)
    return GriffinAttentionBlock(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

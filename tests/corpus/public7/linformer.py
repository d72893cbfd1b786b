"""lucidrains/linformer, linformer/linformer.py (``LinformerSelfAttention.forward``;
https://github.com/lucidrains/linformer): keys and values projected along the tokens by ``E``/``F`` of
shape ``(seq_len, k)`` (``self.proj_k = nn.Parameter(init_(torch.zeros(seq_len, k)))``), sliced to the
sequence ``kv_projs = map(lambda t: t[:kv_len], kv_projs)`` and applied with ``einsum('bnd,nk->bkd')``;
queries ``reshape(b, n, h, -1).transpose(1, 2)``; keys and values ``t.reshape(b, k, -1,
d_h).transpose(1, 2)``; ``dots = einsum('bhnd,bhkd->bhnk', queries, keys) * (d_h ** -0.5)``;
``dots.softmax(dim=-1)``; ``einsum('bhnk,bhkd->bhnd', attn, values)``; merged ``out.transpose(1,
2).reshape(b, n, -1)``.

Bugs (argument): ``proj-no-transpose-back``: ``E`` applied by matmul on ``keys.transpose(1, 2)``
(``(b, d, n) @ (n, k)``) and the result ``(b, d, k)`` reshaped ``(b, k, h, d_h)`` without transposing
back: projected tokens and features mixed (the matmul form of the einsum, one transpose short);
``softmax-queries``: ``dots.softmax(dim=-2)``: normalised over the queries."""

import sys

import torch
from torch import einsum, nn

BUGS = ("proj-no-transpose-back", "softmax-queries")
TWINS = ()
DIMS = ("B=2 T=12 D=32 H=4",)


def init_(tensor):
    dim = tensor.shape[-1]
    std = 1 / dim**0.5
    tensor.uniform_(-std, std)
    return tensor


class LinformerSelfAttention(nn.Module):
    def __init__(self, dim=32, seq_len=16, k=5, heads=4, bug=""):
        super().__init__()
        self.seq_len, self.k, self.heads, self.bug = seq_len, k, heads, bug
        dim_head = dim // heads
        self.dim_head = dim_head
        self.to_q = nn.Linear(dim, dim_head * heads, bias=False)
        self.to_k = nn.Linear(dim, dim_head * heads, bias=False)
        self.proj_k = nn.Parameter(init_(torch.zeros(seq_len, k)))
        self.to_v = nn.Linear(dim, dim_head * heads, bias=False)
        self.proj_v = nn.Parameter(init_(torch.zeros(seq_len, k)))
        self.to_out = nn.Linear(dim_head * heads, dim)

    def forward(self, x):
        b, n, d, d_h, h, k = *x.shape, self.dim_head, self.heads, self.k  # noqa: F841  (as in lucidrains)
        kv_len = n
        queries = self.to_q(x)
        keys = self.to_k(x)
        values = self.to_v(x)
        kv_projs = (self.proj_k, self.proj_v)
        kv_projs = map(lambda t: t[:kv_len], kv_projs)  # (n, k) each
        if self.bug == "proj-no-transpose-back":
            keys, values = ((t.transpose(1, 2) @ e) for t, e in zip((keys, values), kv_projs))  # bug: (b, d, k)
        else:
            def proj_seq_len(args):
                return einsum("bnd,nk->bkd", *args)
            keys, values = map(proj_seq_len, zip((keys, values), kv_projs))  # (b, k, d)
        queries = queries.reshape(b, n, h, -1).transpose(1, 2)  # (b, h, n, d_h)

        def merge_key_values(t):
            return t.reshape(b, k, -1, d_h).transpose(1, 2)  # (b, h, k, d_h)

        keys, values = map(merge_key_values, (keys, values))
        dots = einsum("bhnd,bhkd->bhnk", queries, keys) * (d_h**-0.5)  # (b, h, n, k)
        attn = dots.softmax(dim=-2 if self.bug == "softmax-queries" else -1)
        out = einsum("bhnk,bhkd->bhnd", attn, values)  # (b, h, n, d_h)
        out = out.transpose(1, 2).reshape(b, n, -1)  # (b, n, h·d_h)
        return self.to_out(out)


def build(bug="", B=2, T=12, D=32, H=4):
    """--dims 'B=2 T=12 D=32 H=4': tokens (B, T, D); E and F are (seq_len = 16, k = 5)."""
    torch.manual_seed(0)
    return LinformerSelfAttention(D, 16, 5, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

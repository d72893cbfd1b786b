"""allenai/OLMo-core PR #591 ("Fix RoPE positions to reset at document boundaries when using doc_lens"; the
same gap as pytorch/torchtitan issue #2559, "RoPE positions are never set", fixed by PR #2560): with
documents packed into one row and ``cu_doc_lens`` passed, the attention was masked per document but RoPE was
given the row's global positions, so the second document's tokens were rotated as ``[20, 21, …]`` instead of
``[0, 1, …]``: identical documents packed at different offsets gave different logits. The fix derives each
token's position within its document (``searchsorted`` on the cumulative lengths).

The idiom (OLMo-core's ``Attention`` with ``RotaryEmbedding``): ``w_q``/``w_k``/``w_v``/``w_out``, ``view(B,
T, H, d)``, ``inv_freq`` and ``cos``/``sin`` from the positions, ``rotate_half``, ``transpose(1, 2)``, SDPA
with a block-diagonal causal mask from the document ids. Each row packs two documents, of 2 and T - 2
tokens.

Twin (argument): ``global-positions``: RoPE from ``arange(T)``, not restarted per document (the report). Not a
bug the trace can see, nor one exact arithmetic has: RoPE's scores depend on ``q_pos - k_pos`` only, and the
mask keeps each query to its own document, where the global positions are the per-document ones plus one
constant offset; the two files' outputs agree to 6e-8 in float32. The report's differences are numerical
(bf16 tables at large angles), a precision effect, not a layout one."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ()
TWINS = ("global-positions",)
DIMS = ("B=2 T=6 D=32 H=4",)
FIRST_DOC = 2


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, theta=10_000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim))

    def forward(self, q, k, positions):
        freqs = torch.einsum("bt,f->btf", positions.float(), self.inv_freq)     # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(2)                    # (B, T, 1, d)
        cos, sin = emb.cos(), emb.sin()
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin   # [rope]


class Attention(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.head_dim, self.bug = n_heads, d_model // n_heads, bug
        self.w_q, self.w_k, self.w_v, self.w_out = (nn.Linear(d_model, d_model, bias=False) for _ in range(4))
        self.rope = RotaryEmbedding(self.head_dim)

    def forward(self, x, cu_doc_lens):
        B, T, _ = x.shape
        q = self.w_q(x).view(B, T, self.n_heads, self.head_dim)
        k = self.w_k(x).view(B, T, self.n_heads, self.head_dim)
        v = self.w_v(x).view(B, T, self.n_heads, self.head_dim)
        idx = torch.arange(T)
        doc_ids = torch.searchsorted(cu_doc_lens, idx, right=True) - 1               # (T,)
        if self.bug == "global-positions":
            positions = idx.expand(B, T)                                             # [positions]
        else:
            positions = (idx - cu_doc_lens[doc_ids]).expand(B, T)                    # [positions]
        q, k = self.rope(q, k, positions)
        mask = (doc_ids[:, None] == doc_ids[None, :]) & torch.ones(T, T, dtype=torch.bool).tril()
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)                # (B, H, T, d)
        return self.w_out(out.transpose(1, 2).reshape(B, T, -1))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    cu_doc_lens = torch.tensor([0, FIRST_DOC, T])
    return Attention(D, H, bug).eval(), (torch.randn(B, T, D), cu_doc_lens)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

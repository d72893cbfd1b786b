"""Alpha-VLLM/Lumina-T2X, lumina_next_t2i/models/model.py (Lumina-Next, ``Attention``, ``apply_rotary_emb``,
``precompute_freqs_cis``, ``TransformerBlock``): Next-DiT's self-attention over image patches, separate ``wq``,
``wk``, ``wv`` (``n_kv_heads`` key/value heads), the query/key norms ``nn.LayerNorm(n_heads * head_dim)`` taken
over the whole projection before ``view(B, N, H, d)``, 2-D rotary positions as a complex table built per axis
(``freqs_cis`` of rows and of columns, ``cat`` along the last axis and flattened over the patch grid), applied with
``torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))``, the key/value heads repeated by
``xk.unsqueeze(3).repeat(1, 1, 1, n_rep, 1).flatten(2, 3)``, ``F.scaled_dot_product_attention`` over
``permute(0, 2, 1, 3)``, ``wo``; adaLN-style gated residual from a conditioning vector.

Bugs: ``kv-heads-tiled``: ``xk.repeat(1, 1, n_rep, 1)`` (the key/value heads tiled: query head ``i`` reads key
head ``i % H_kv`` instead of ``i // n_rep``, the GQA head-order slip reported against several Next-DiT ports);
``rotary-rows-columns-swapped``: the 2-D table flattened over ``(W, H)`` (``freqs_cis.permute(1, 0, 2)``) where the
patches are flattened row-major ``(H, W)`` (the rows-and-columns swap of 2-D rotary, visible only at non-square
grids)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, dtype=torch.float32)
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs))   # [end, dim/2] complex


def freqs_2d(head_dim, rows, cols, bug=""):
    fr = precompute_freqs_cis(head_dim // 2, rows)              # [rows, d/4]
    fc = precompute_freqs_cis(head_dim // 2, cols)              # [cols, d/4]
    grid = torch.cat([fr[:, None, :].expand(rows, cols, -1), fc[None, :, :].expand(rows, cols, -1)], dim=-1)
    if bug == "rotary-rows-columns-swapped":
        grid = grid.permute(1, 0, 2)
    return grid.flatten(0, 1)                                    # [rows*cols, d/2]


def apply_rotary_emb(x_in, freqs_cis):
    x = torch.view_as_complex(x_in.float().reshape(*x_in.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.unsqueeze(0).unsqueeze(2)              # [1, N, 1, d/2]
    return torch.view_as_real(x * freqs_cis).flatten(3).type_as(x_in)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, bug=""):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.bug = n_heads, n_kv_heads, bug
        self.n_rep = n_heads // n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.q_norm = nn.LayerNorm(n_heads * self.head_dim)
        self.k_norm = nn.LayerNorm(n_kv_heads * self.head_dim)

    def forward(self, x, freqs_cis):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq, xk = self.q_norm(xq), self.k_norm(xk)
        xq = xq.view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, freqs_cis), apply_rotary_emb(xk, freqs_cis)
        if self.n_rep > 1:
            if self.bug == "kv-heads-tiled":
                xk, xv = xk.repeat(1, 1, self.n_rep, 1), xv.repeat(1, 1, self.n_rep, 1)
            else:
                xk = xk.unsqueeze(3).repeat(1, 1, 1, self.n_rep, 1).flatten(2, 3)
                xv = xv.unsqueeze(3).repeat(1, 1, 1, self.n_rep, 1).flatten(2, 3)
        output = F.scaled_dot_product_attention(
            xq.permute(0, 2, 1, 3), xk.permute(0, 2, 1, 3), xv.permute(0, 2, 1, 3)).permute(0, 2, 1, 3)
        return self.wo(output.flatten(-2))


class TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, bug=""):
        super().__init__()
        self.attention = Attention(dim, n_heads, n_kv_heads, bug)
        self.attention_norm1 = nn.LayerNorm(dim, elementwise_affine=False)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))

    def forward(self, x, freqs_cis, adaln_input):
        scale_msa, gate_msa = self.adaLN_modulation(adaln_input).chunk(2, dim=1)
        h = self.attention(self.attention_norm1(x) * (1 + scale_msa.unsqueeze(1)), freqs_cis)
        return x + gate_msa.unsqueeze(1).tanh() * h


class NextDiT(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, rows, cols, bug=""):
        super().__init__()
        self.rows, self.cols, self.bug = rows, cols, bug
        self.x_embedder = nn.Linear(2 * 2 * 4, dim)
        self.block = TransformerBlock(dim, n_heads, n_kv_heads, bug)
        self.final = nn.Linear(dim, 2 * 2 * 4)

    def forward(self, x, adaln_input):
        B, C, Hh, Ww = x.shape
        x = x.view(B, C, Hh // 2, 2, Ww // 2, 2).permute(0, 2, 4, 1, 3, 5).flatten(3).flatten(1, 2)
        x = self.x_embedder(x)
        freqs_cis = freqs_2d(self.block.attention.head_dim, self.rows, self.cols, self.bug)
        return self.final(self.block(x, freqs_cis, adaln_input))


BUGS = ("kv-heads-tiled", "rotary-rows-columns-swapped")
TWINS = ()
DIMS = ("B=2 D=64 H=4 H_kv=2",)
EQUAL = {"B=2 D=64 H=4 H_kv=2": "B=4 D=64 H=4 H_kv=2"}


def build(bug="", B=2, D=64, H=4, H_kv=2, T=None):
    """A 4x6 latent in 2x2 patches: a 2x3 grid of 6 patch tokens (non-square, so a rows/columns swap moves
    positions)."""
    torch.manual_seed(0)
    model = NextDiT(D, H, H_kv, rows=2, cols=3, bug=bug).eval()
    return model, (torch.randn(B, 4, 4, 6), torch.randn(B, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

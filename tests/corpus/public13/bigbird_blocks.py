"""huggingface/transformers, src/transformers/models/big_bird/modeling_big_bird.py (v4.40,
``BigBirdBlockSparseAttention.bigbird_block_sparse_attention``), its sliding part: q, k, v ``(B, H, T, d)`` cut
into blocks ``view(B, H, T // bs, bs, d)``; the middle query blocks read three key blocks, gathered by the
shifted slices ``torch.cat([blocked_key[:, :, 1:-3], blocked_key[:, :, 2:-2], blocked_key[:, :, 3:-1]],
dim=3)`` (keys of blocks i - 1, i, i + 1 for query block i = 2 .. n - 3; the same slices of the values), plus
the first and last key blocks (global); ``einsum("bhlqd,bhlkd->bhlqk")`` per block, one ``softmax`` over the
band and the global keys together, the weights split back; the first and last query blocks and the second and
second-to-last (which BigBird treats apart) attend to everything here (dense, as the global rows do);
``cat`` of the blocks back into ``(B, H, T, d)``. Random blocks left out.

Bugs (argument): ``value-band-shifted``: the values' band gathered ``[0:-4], [1:-3], [2:-2]`` while the keys'
is ``[1:-3], [2:-2], [3:-1]`` (an off-by-one between two copies of the same slice list: each weight then
multiplies the value of the block before the one it scored)."""

import sys

import torch
from torch import nn


class BigBirdBlockSparseAttention(nn.Module):
    def __init__(self, dim, heads, block_size, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.block_size, self.bug = heads, dim // heads, block_size, bug
        self.query, self.key, self.value = (nn.Linear(dim, dim) for _ in range(3))

    @staticmethod
    def band(blocked, shift=0):                                                     # (B, H, n, bs, d)
        s = shift
        return torch.cat([blocked[:, :, 1 - s : -3 - s], blocked[:, :, 2 - s : -2 - s],
                          blocked[:, :, 3 - s : -1 - s]], dim=3)                     # (B, H, n-4, 3bs, d)

    def forward(self, hidden_states):                                               # (B, T, D)
        B, T, D = hidden_states.shape
        H, d, bs = self.heads, self.head_dim, self.block_size
        n = T // bs
        q, k, v = (p(hidden_states).view(B, T, H, d).transpose(1, 2) for p in (self.query, self.key, self.value))
        bq, bk, bv = (t.view(B, H, n, bs, d) for t in (q, k, v))                     # (B, H, n, bs, d)
        dense = torch.softmax(q @ k.transpose(-2, -1) * d**-0.5, dim=-1) @ v       # (B, H, T, d)
        band_k = self.band(bk)                                                       # (B, H, n-4, 3bs, d)
        band_v = self.band(bv, shift=1 if self.bug == "value-band-shifted" else 0)
        middle_q = bq[:, :, 2:-2]                                                    # (B, H, n-4, bs, d)
        band_product = torch.einsum("bhlqd,bhlkd->bhlqk", middle_q, band_k)          # (B, H, n-4, bs, 3bs)
        first_product = torch.einsum("bhlqd,bhkd->bhlqk", middle_q, bk[:, :, 0])    # (B, H, n-4, bs, bs)
        last_product = torch.einsum("bhlqd,bhkd->bhlqk", middle_q, bk[:, :, -1])
        product = torch.cat([first_product, band_product, last_product], dim=-1) * d**-0.5
        weights = torch.softmax(product, dim=-1)                                     # (B, H, n-4, bs, 5bs)
        middle = torch.einsum("bhlqk,bhlkd->bhlqd", weights[..., bs:-bs], band_v)
        middle = middle + torch.einsum("bhlqk,bhkd->bhlqd", weights[..., :bs], bv[:, :, 0])
        middle = middle + torch.einsum("bhlqk,bhkd->bhlqd", weights[..., -bs:], bv[:, :, -1])
        middle = middle.reshape(B, H, (n - 4) * bs, d)
        context = torch.cat([dense[:, :, : 2 * bs], middle, dense[:, :, -2 * bs :]], dim=2)  # (B, H, T, d)
        return context.transpose(1, 2).reshape(B, T, D)


class BigBirdLayer(nn.Module):
    def __init__(self, dim, heads, bug="", block_size=2):
        super().__init__()
        self.norm, self.attention = nn.LayerNorm(dim), BigBirdBlockSparseAttention(dim, heads, block_size, bug)
        self.output = nn.Linear(dim, dim)

    def forward(self, hidden_states):
        return hidden_states + self.output(self.attention(self.norm(hidden_states)))


BUGS = ("value-band-shifted",)
TWINS = ()
DIMS = ("B=2 T=12 D=64 H=4",)
EQUAL = {"B=2 T=12 D=64 H=4": "B=12 T=12 D=48 H=12"}


def build(bug="", B=2, T=12, D=64, H=4):
    torch.manual_seed(0)
    return BigBirdLayer(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""Shujun-He/RibonanzaNet issue #4 ("``attention_mask`` does not cover entire padding region", open) and issue #5
("attention value is not masked out by attention mask", open), both on ``Network.py``. ``MultiHeadAttention.forward``
turns the padding mask ``src_mask`` (1 = nucleotide, 0 = pad) into +1 / -1 first (``src_mask[src_mask==0] = -1``)
and builds the pair mask as its outer product, ``torch.matmul(src_mask, src_mask.permute(0, 2, 1))``;
``ScaledDotProductAttention`` then fills ``attn_mask == -1`` with ``-1e9``. Issue #4: a pad times a pad is
``(-1)(-1) = +1``, so the pad rows attend to the pad columns (the rows ``[-1, -1, -1, 1, 1]`` for a length-3 sequence
padded to 5), where every entry of a pad row or column should be -1. Issue #5: an earlier commit (efebd44) filled
with ``float('-1e-9')``, which is practically 0, so the mask hid nothing (the reporter's plot: pads attended).

The idiom (``ConvTransformerEncoderLayer`` / ``MultiHeadAttention`` / ``ScaledDotProductAttention``): ``w_qs``,
``w_ks``, ``w_vs`` without bias, ``view(sz_b, len_q, n_head, d_k)`` then ``transpose(1, 2)``, ``matmul(q,
k.transpose(2, 3)) / temperature`` (``d_k ** 0.5``), the pairwise bias added as ``mask`` (``relpos``: a one-hot of the
clipped offset ``i - j`` in 33 bins, ``nn.Linear(33, pairwise_dim)``; ``pairwise_norm``, ``pairwise2heads``,
``permute(0, 3, 1, 2)``), ``masked_fill``, ``softmax(dim=-1)``, ``matmul`` with ``v``, ``transpose(1, 2).view(sz_b,
len_q, -1)``; post-norm residuals, the sequence transition MLP. The second sequence is padded by two.

Bugs: ``pair-mask-outer-product``: the +1/-1 outer product (issue #4); ``mask-fill-tiny``: the fill ``-1e-9``
(issue #5). The correct file takes the outer product of the 0/1 mask and marks its zeros -1."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("pair-mask-outer-product", "mask-fill-tiny")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class ScaledDotProductAttention(nn.Module):
    def __init__(self, temperature, bug=""):
        super().__init__()
        self.temperature, self.bug = temperature, bug

    def forward(self, q, k, v, mask=None, attn_mask=None):
        attn = torch.matmul(q, k.transpose(2, 3)) / self.temperature                   # (B, H, L, L)
        if mask is not None:
            attn = attn + mask                                                          # the pairwise bias
        if attn_mask is not None:
            fill = float('-1e-9') if self.bug == "mask-fill-tiny" else float('-1e9')
            attn = attn.float().masked_fill(attn_mask == -1, fill)
        attn = F.softmax(attn, dim=-1)
        return torch.matmul(attn, v), attn                                              # (B, H, L, d_v)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, d_k, d_v, bug=""):
        super().__init__()
        self.n_head, self.d_k, self.d_v, self.bug = n_head, d_k, d_v, bug
        self.w_qs = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_ks = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_vs = nn.Linear(d_model, n_head * d_v, bias=False)
        self.attention = ScaledDotProductAttention(temperature=d_k ** 0.5, bug=bug)

    def forward(self, q, k, v, mask=None, src_mask=None):
        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head
        sz_b, len_q, len_k, len_v = q.size(0), q.size(1), k.size(1), v.size(1)
        q = self.w_qs(q).view(sz_b, len_q, n_head, d_k)                                 # (B, L, H, d_k)
        k = self.w_ks(k).view(sz_b, len_k, n_head, d_k)                                 # (B, L, H, d_k)
        v = self.w_vs(v).view(sz_b, len_v, n_head, d_v)                                 # (B, L, H, d_v)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)               # (B, H, L, d)
        if self.bug == "pair-mask-outer-product":
            src_mask = src_mask.clone().unsqueeze(-1).long()                            # (B, L, 1)
            src_mask[src_mask == 0] = -1
            src_mask = src_mask.float()
            attn_mask = torch.matmul(src_mask, src_mask.permute(0, 2, 1)).unsqueeze(1).long()   # (B, 1, L, L)
        else:
            src_mask = src_mask.clone().unsqueeze(-1).float()                           # (B, L, 1)
            attn_mask = torch.matmul(src_mask, src_mask.permute(0, 2, 1)).unsqueeze(1).long()   # (B, 1, L, L)
            attn_mask[attn_mask == 0] = -1
        q, attn = self.attention(q, k, v, mask=mask, attn_mask=attn_mask)
        q = q.transpose(1, 2).contiguous().view(sz_b, len_q, -1)                        # (B, L, H*d_v)
        return q, attn


class relpos(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.linear = nn.Linear(33, dim)

    def forward(self, src):
        L = src.shape[1]
        res_id = torch.arange(L).unsqueeze(0)                                           # (1, L)
        bin_values = torch.arange(-16, 17)
        d = res_id[:, :, None] - res_id[:, None, :]                                     # (1, L, L)
        bdy = torch.tensor(16)
        d = torch.minimum(torch.maximum(-bdy, d), bdy)
        d_onehot = (d[..., None] == bin_values).float()                                 # (1, L, L, 33)
        return self.linear(d_onehot)                                                    # (1, L, L, P)


class ConvTransformerEncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, pairwise_dimension, bug=""):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, nhead, d_model // nhead, d_model // nhead, bug)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.pairwise2heads = nn.Linear(pairwise_dimension, nhead, bias=False)
        self.pairwise_norm = nn.LayerNorm(pairwise_dimension)
        self.sequence_transititon = nn.Sequential(nn.Linear(d_model, d_model * 4), nn.ReLU(),
                                                  nn.Linear(d_model * 4, d_model))

    def forward(self, src, pairwise_features, src_mask=None):
        pairwise_bias = self.pairwise2heads(self.pairwise_norm(pairwise_features)).permute(0, 3, 1, 2)  # (1, H, L, L)
        res = src
        src, attention_weights = self.self_attn(src, src, src, mask=pairwise_bias, src_mask=src_mask)
        src = self.norm1(res + src)
        src = self.norm2(src + self.sequence_transititon(src))
        return src


class RibonanzaNet(nn.Module):
    def __init__(self, ninp, nhead, bug=""):
        super().__init__()
        self.pos_encoder = relpos(ninp)
        self.layer = ConvTransformerEncoderLayer(ninp, nhead, ninp, bug)

    def forward(self, src, src_mask):                                                   # (B, L, D), (B, L)
        pairwise_features = self.pos_encoder(src)
        return self.layer(src, pairwise_features, src_mask)                             # (B, L, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    src_mask = torch.ones(B, T, dtype=torch.long)
    src_mask[1, T - 2:] = 0                                                             # right padding
    return RibonanzaNet(D, H, bug).eval(), (torch.randn(B, T, D), src_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""RosettaCommons/RFdiffusion, rfdiffusion/Attention_module.py (``SequenceWeight``, ``MSARowAttentionWithBias``,
``MSAColAttention``) as ``MSAPairStr2MSA.forward`` in rfdiffusion/Track_module.py calls them, commit 86507b6 (the
RoseTTAFold MSA track): the MSA ``msa`` ``(B, N, L, d_msa)`` (N aligned sequences of L residues; here N = S, L = T)
and the pair ``(B, L, L, d_pair)``. Row attention is *tied* over the sequences: ``SequenceWeight`` scores every
sequence against the target (``msa[:, 0]``), ``einsum('bqihd,bkihd->bkihq')`` and ``softmax(dim=1)`` over the N
sequences; ``query * seq_weight.expand(...)``, ``key * scaling``, one map for all rows ``einsum('bsqhd,bskhd->
bqkh')`` ``(B, L, L, h)`` (heads last), the pair bias ``to_b(pair)`` ``(B, L, L, h)`` added, ``softmax(dim=-2)`` over
the keys, ``einsum('bqkh,bskhd->bsqhd')``, ``reshape(B, N, L, -1)``, the sigmoid gate ``to_g(msa)``, ``to_out``.
Column attention: ``einsum('bqihd,bkihd->bihqk')`` over the sequences of each residue, ``softmax(dim=-1)``,
``einsum('bihqk,bkihd->bqihd')``, ``reshape(B, N, L, -1)``, gated. (``opt_einsum``'s ``contract`` written
``torch.einsum``; the zero-initialised ``to_out`` and gate of ``reset_parameter`` left to PyTorch's defaults:
zeroed, the block would be an identity.)

Bugs: ``row-softmax-last-axis``: ``F.softmax(attn, dim=-1)`` on the ``bqkh`` map, the usual ``dim=-1`` of a
``bhqk`` layout (the weights sum to one over the heads, not the keys); ``seq-weight-over-residues``:
``SequenceWeight``'s ``softmax(dim=2)`` (over the L residues of ``(B, N, L, h, 1)``, not the N sequences);
``col-out-not-transposed``: the column attention's output ``einsum('bihqk,bkihd->bihqd')`` (the query sequence
left after the residue) and ``reshape(B, N, L, -1)`` as before: residues and sequences interleaved."""

import math
import sys

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn


class SequenceWeight(nn.Module):
    def __init__(self, d_msa, n_head, d_hidden, bug=""):
        super().__init__()
        self.h, self.dim, self.scale, self.bug = n_head, d_hidden, 1.0 / math.sqrt(d_hidden), bug
        self.to_query = nn.Linear(d_msa, n_head * d_hidden)
        self.to_key = nn.Linear(d_msa, n_head * d_hidden)

    def forward(self, msa):
        B, N, L = msa.shape[:3]
        tar_seq = msa[:, 0]
        q = self.to_query(tar_seq).view(B, 1, L, self.h, self.dim)                  # (B, 1, L, h, d)
        k = self.to_key(msa).view(B, N, L, self.h, self.dim)                        # (B, N, L, h, d)
        q = q * self.scale
        attn = torch.einsum("bqihd,bkihd->bkihq", q, k)                             # (B, N, L, h, 1)
        return F.softmax(attn, dim=2 if self.bug == "seq-weight-over-residues" else 1)


class MSARowAttentionWithBias(nn.Module):
    def __init__(self, d_msa, d_pair, n_head, d_hidden, bug=""):
        super().__init__()
        self.norm_msa = nn.LayerNorm(d_msa)
        self.norm_pair = nn.LayerNorm(d_pair)
        self.seq_weight = SequenceWeight(d_msa, n_head, d_hidden, bug)
        self.to_q = nn.Linear(d_msa, n_head * d_hidden, bias=False)
        self.to_k = nn.Linear(d_msa, n_head * d_hidden, bias=False)
        self.to_v = nn.Linear(d_msa, n_head * d_hidden, bias=False)
        self.to_b = nn.Linear(d_pair, n_head, bias=False)
        self.to_g = nn.Linear(d_msa, n_head * d_hidden)
        self.to_out = nn.Linear(n_head * d_hidden, d_msa)
        self.scaling, self.h, self.dim, self.bug = 1 / math.sqrt(d_hidden), n_head, d_hidden, bug

    def forward(self, msa, pair):
        B, N, L = msa.shape[:3]
        msa = self.norm_msa(msa)
        pair = self.norm_pair(pair)
        seq_weight = self.seq_weight(msa)                                           # (B, N, L, h, 1)
        query = self.to_q(msa).reshape(B, N, L, self.h, self.dim)                   # (B, N, L, h, d)
        key = self.to_k(msa).reshape(B, N, L, self.h, self.dim)                     # (B, N, L, h, d)
        value = self.to_v(msa).reshape(B, N, L, self.h, self.dim)                   # (B, N, L, h, d)
        bias = self.to_b(pair)                                                      # (B, L, L, h)
        gate = torch.sigmoid(self.to_g(msa))
        query = query * seq_weight.expand(-1, -1, -1, -1, self.dim)
        key = key * self.scaling
        attn = torch.einsum("bsqhd,bskhd->bqkh", query, key)                        # (B, L, L, h)
        attn = attn + bias
        attn = F.softmax(attn, dim=-1 if self.bug == "row-softmax-last-axis" else -2)
        out = torch.einsum("bqkh,bskhd->bsqhd", attn, value).reshape(B, N, L, -1)  # (B, N, L, h·d)
        out = gate * out
        return self.to_out(out)


class MSAColAttention(nn.Module):
    def __init__(self, d_msa, n_head, d_hidden, bug=""):
        super().__init__()
        self.norm_msa = nn.LayerNorm(d_msa)
        self.to_q = nn.Linear(d_msa, n_head * d_hidden, bias=False)
        self.to_k = nn.Linear(d_msa, n_head * d_hidden, bias=False)
        self.to_v = nn.Linear(d_msa, n_head * d_hidden, bias=False)
        self.to_g = nn.Linear(d_msa, n_head * d_hidden)
        self.to_out = nn.Linear(n_head * d_hidden, d_msa)
        self.scaling, self.h, self.dim, self.bug = 1 / math.sqrt(d_hidden), n_head, d_hidden, bug

    def forward(self, msa):
        B, N, L = msa.shape[:3]
        msa = self.norm_msa(msa)
        query = self.to_q(msa).reshape(B, N, L, self.h, self.dim)                   # (B, N, L, h, d)
        key = self.to_k(msa).reshape(B, N, L, self.h, self.dim)                     # (B, N, L, h, d)
        value = self.to_v(msa).reshape(B, N, L, self.h, self.dim)                   # (B, N, L, h, d)
        gate = torch.sigmoid(self.to_g(msa))
        query = query * self.scaling
        attn = torch.einsum("bqihd,bkihd->bihqk", query, key)                       # (B, L, h, N, N)
        attn = F.softmax(attn, dim=-1)
        if self.bug == "col-out-not-transposed":
            out = torch.einsum("bihqk,bkihd->bihqd", attn, value).reshape(B, N, L, -1)   # read as (B, N, L, h·d)
        else:
            out = torch.einsum("bihqk,bkihd->bqihd", attn, value).reshape(B, N, L, -1)   # (B, N, L, h·d)
        out = gate * out
        return self.to_out(out)


class MSAPairStr2MSA(nn.Module):
    def __init__(self, d_msa, d_pair, n_head, d_hidden, bug=""):
        super().__init__()
        self.row_attn = MSARowAttentionWithBias(d_msa, d_pair, n_head, d_hidden, bug)
        self.col_attn = MSAColAttention(d_msa, n_head, d_hidden, bug)

    def forward(self, msa, pair):
        msa = msa + self.row_attn(msa, pair)
        return msa + self.col_attn(msa)                                             # (B, N, L, d_msa)


BUGS = ("row-softmax-last-axis", "seq-weight-over-residues", "col-out-not-transposed")
TWINS = ()
DIMS = ("B=2 S=3 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 S=4 T=4 D=32 H=4"}
D_PAIR = 16


def build(bug="", B=2, S=3, T=5, D=32, H=4):  # noqa: N803
    """An MSA of ``S`` sequences of ``T`` residues for each of ``B`` structures, and their pair features."""
    torch.manual_seed(0)
    inputs = (torch.randn(B, S, T, D), torch.randn(B, T, T, D_PAIR))
    return MSAPairStr2MSA(D, D_PAIR, H, D // H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

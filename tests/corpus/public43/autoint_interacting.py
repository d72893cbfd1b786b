"""shenweichen/DeepCTR-Torch, deepctr_torch/layers/interaction.py (``InteractingLayer``, the AutoInt layer, commit
b4d8181): multi-head self-attention over the feature fields of a click-through-rate model. ``torch.tensordot(inputs,
W_Query, dims=([-1], [0]))`` ``(B, F, E)`` for the queries, keys and values; the heads split by
``torch.stack(torch.split(querys, att_embedding_size, dim=2))`` ``(H, B, F, E/H)`` (head-major, on a new leading
axis); ``torch.einsum('bnik,bnjk->bnij', querys, keys)`` ``(H, B, F, F)``, optionally ``/= att_embedding_size **
0.5`` (``scaling``), ``F.softmax(inner_product, dim=-1)``, ``torch.matmul(scores, values)``; the heads merged by
``torch.cat(torch.split(result, 1), dim=-1)`` ``(1, B, F, E)`` and ``torch.squeeze(result, dim=0)``, a residual
``tensordot(inputs, W_Res)`` and ReLU. Fields play the tokens (``T``), the embedding ``D``.

Bugs: ``merge-by-reshape``: the heads merged by ``result.reshape(B, F, -1)`` (a reshape of the head-major
``(H, B, F, E/H)`` stack, as a port from ``(B, F, H, E/H)`` code would write it: heads and samples mixed);
``einsum-output-transposed``: ``'bnik,bnjk->bnji'`` (the scores written keys-first, so the softmax over the last
axis normalises over the queries). Twin: ``scaled``: ``scaling=True`` (correct)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class InteractingLayer(nn.Module):
    def __init__(self, embedding_size, head_num=2, use_res=True, scaling=False, bug=""):
        super().__init__()
        self.att_embedding_size = embedding_size // head_num
        self.head_num, self.use_res, self.scaling, self.bug = head_num, use_res, scaling, bug
        self.W_Query = nn.Parameter(torch.empty(embedding_size, embedding_size))
        self.W_key = nn.Parameter(torch.empty(embedding_size, embedding_size))
        self.W_Value = nn.Parameter(torch.empty(embedding_size, embedding_size))
        self.W_Res = nn.Parameter(torch.empty(embedding_size, embedding_size))
        for tensor in self.parameters():
            nn.init.normal_(tensor, mean=0.0, std=0.05)

    def forward(self, inputs):                                                      # (B, F, E)
        batch, fields, _ = inputs.shape
        querys = torch.tensordot(inputs, self.W_Query, dims=([-1], [0]))            # (B, F, E)
        keys = torch.tensordot(inputs, self.W_key, dims=([-1], [0]))                # (B, F, E)
        values = torch.tensordot(inputs, self.W_Value, dims=([-1], [0]))            # (B, F, E)
        querys = torch.stack(torch.split(querys, self.att_embedding_size, dim=2))   # (H, B, F, E/H)
        keys = torch.stack(torch.split(keys, self.att_embedding_size, dim=2))       # (H, B, F, E/H)
        values = torch.stack(torch.split(values, self.att_embedding_size, dim=2))   # (H, B, F, E/H)
        pattern = "bnik,bnjk->bnji" if self.bug == "einsum-output-transposed" else "bnik,bnjk->bnij"
        inner_product = torch.einsum(pattern, querys, keys)                         # (H, B, F, F) [bug-einsum]
        if self.scaling:
            inner_product = inner_product / self.att_embedding_size ** 0.5
        normalized_att_scores = F.softmax(inner_product, dim=-1)                    # (H, B, F, F)
        result = torch.matmul(normalized_att_scores, values)                        # (H, B, F, E/H)
        if self.bug == "merge-by-reshape":
            result = result.reshape(batch, fields, -1)                              # (B, F, E) [bug-merge]
        else:
            result = torch.cat(torch.split(result, 1), dim=-1)                      # (1, B, F, E)
            result = torch.squeeze(result, dim=0)                                   # (B, F, E) [autoint-out]
        if self.use_res:
            result = result + torch.tensordot(inputs, self.W_Res, dims=([-1], [0]))
        return F.relu(result)


BUGS = ("merge-by-reshape", "einsum-output-transposed")
TWINS = ("scaled",)
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = InteractingLayer(D, H, scaling=bug == "scaled", bug=bug).eval()
    return model, (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

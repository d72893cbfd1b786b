"""pmixer/SASRec.pytorch, model.py (``SASRec.log2feats``, commit of 2023): item ids ``(B, T)`` (0 pads the
left); ``seqs = item_emb(log_seqs) * item_emb.embedding_dim ** 0.5`` plus ``pos_emb`` of the positions (``poss
*= (log_seqs != 0)``); ``timeline_mask = (log_seqs == 0)`` zeroing the padded steps ``seqs *= ~timeline_mask
.unsqueeze(-1)``; ``attention_mask = ~tril(ones(T, T, dtype=bool))``; each block ``torch.nn.MultiheadAttention``
over ``seqs.transpose(0, 1)`` (``(T, B, D)``) with ``attn_mask=attention_mask``, the layer norm of the queries
first (``Q = attention_layernorms[i](seqs)``, ``mha_outputs, _ = attention_layers[i](Q, seqs, seqs, ...)``).

Bugs (argument): ``mask-not-inverted``: ``attention_mask = tril(ones(T, T, dtype=bool))`` without ``~`` (a
boolean ``attn_mask`` is True where attention is *not* allowed: each item sees only its future and itself,
the slip of reading the mask as "keep"); ``batch-first-missing``: ``seqs`` fed ``(B, T, D)`` without the
``transpose(0, 1)`` to a sequence-first ``MultiheadAttention`` (the batch read as the sequence: SASRec.pytorch
issue #31's class of bug)."""

import sys

import torch
from torch import nn


class SASRec(nn.Module):
    def __init__(self, item_num, maxlen, hidden_units, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.item_emb = nn.Embedding(item_num + 1, hidden_units, padding_idx=0)
        self.pos_emb = nn.Embedding(maxlen + 1, hidden_units, padding_idx=0)
        self.attention_layernorm = nn.LayerNorm(hidden_units, eps=1e-8)
        self.attention_layer = nn.MultiheadAttention(hidden_units, heads)
        self.last_layernorm = nn.LayerNorm(hidden_units, eps=1e-8)

    def forward(self, log_seqs):                                                   # (B, T)
        seqs = self.item_emb(log_seqs) * self.item_emb.embedding_dim**0.5
        poss = torch.arange(1, log_seqs.shape[1] + 1).unsqueeze(0).repeat(log_seqs.shape[0], 1)
        poss = poss * (log_seqs != 0)
        seqs = seqs + self.pos_emb(poss)
        timeline_mask = log_seqs == 0
        seqs = seqs * ~timeline_mask.unsqueeze(-1)                                   # (B, T, D)
        if self.bug != "batch-first-missing":
            seqs = torch.transpose(seqs, 0, 1)                                       # (T, B, D)
        tl = seqs.shape[0]
        causal = torch.tril(torch.ones((tl, tl), dtype=torch.bool))
        attention_mask = causal if self.bug == "mask-not-inverted" else ~causal
        Q = self.attention_layernorm(seqs)
        mha_outputs, _ = self.attention_layer(Q, seqs, seqs, attn_mask=attention_mask)
        seqs = Q + mha_outputs
        if self.bug != "batch-first-missing":
            seqs = torch.transpose(seqs, 0, 1)
        seqs = seqs * ~timeline_mask.unsqueeze(-1)
        return self.last_layernorm(seqs)


BUGS = ("mask-not-inverted", "batch-first-missing")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    seqs = torch.randint(1, 50, (B, T))
    seqs[0, :2] = 0
    return SASRec(50, 16, D, H, bug).eval(), (seqs,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

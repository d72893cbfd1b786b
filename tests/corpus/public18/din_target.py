"""shenweichen/DeepCTR-Torch, deepctr_torch/layers/sequence.py (v0.2.9, ``AttentionSequencePoolingLayer``) and
deepctr_torch/layers/core.py (``LocalActivationUnit``): DIN's target attention: the candidate item ``query``
``(B, 1, E)`` expanded to the behaviour sequence ``keys`` ``(B, T, E)`` (``query.expand(-1, T, -1)``),
``torch.cat([queries, keys, queries - keys, queries * keys], dim=-1)`` through an MLP to one score per behaviour
``(B, T, 1)``, ``transpose(1, 2)``; the mask ``torch.arange(T).repeat(B, 1) < keys_length.view(-1, 1)``
unsqueezed to ``(B, 1, T)``; no softmax (``weight_normalization=False``): ``torch.where(keys_masks, outputs,
zeros)``; ``torch.matmul(outputs, keys)`` ``(B, 1, E)``. Here E = D, the behaviours T.

Bugs (argument): ``scores-viewed``: the scores ``(B, T, 1)`` made ``(B, 1, T)`` by ``outputs.view(B, 1, T)``:
harmless (a size-1 axis), a twin; ``pool-over-features``: the weighted pooling written ``(outputs.transpose(1, 2)
* keys).sum(dim=-1)`` (summed over the embedding, not the behaviours: one value per behaviour, the slip of
``sum(dim=1)``'s neighbour)."""

import sys

import torch
from torch import nn


class LocalActivationUnit(nn.Module):
    def __init__(self, embedding_dim, hidden=(16, 8)):
        super().__init__()
        self.dnn = nn.Sequential(nn.Linear(4 * embedding_dim, hidden[0]), nn.Sigmoid(),
                                 nn.Linear(hidden[0], hidden[1]), nn.Sigmoid())
        self.dense = nn.Linear(hidden[1], 1)

    def forward(self, query, user_behavior):                                       # (B, 1, E), (B, T, E)
        user_behavior_len = user_behavior.size(1)
        queries = query.expand(-1, user_behavior_len, -1)
        attention_input = torch.cat([queries, user_behavior, queries - user_behavior,
                                     queries * user_behavior], dim=-1)               # (B, T, 4E)
        return self.dense(self.dnn(attention_input))                                 # (B, T, 1)


class AttentionSequencePoolingLayer(nn.Module):
    def __init__(self, embedding_dim, bug=""):
        super().__init__()
        self.bug = bug
        self.local_att = LocalActivationUnit(embedding_dim)

    def forward(self, query, keys, keys_length):                                   # (B, 1, E), (B, T, E), (B, 1)
        batch_size, max_length, _ = keys.size()
        keys_masks = torch.arange(max_length, dtype=keys_length.dtype).repeat(batch_size, 1)
        keys_masks = (keys_masks < keys_length.view(-1, 1)).unsqueeze(1)             # (B, 1, T)
        attention_score = self.local_att(query, keys)                                # (B, T, 1)
        if self.bug == "scores-viewed":
            outputs = attention_score.view(batch_size, 1, max_length)
        else:
            outputs = torch.transpose(attention_score, 1, 2)                         # (B, 1, T)
        paddings = torch.zeros_like(outputs)
        outputs = torch.where(keys_masks, outputs, paddings)
        if self.bug == "pool-over-features":
            return (outputs.transpose(1, 2) * keys).sum(dim=-1)
        return torch.matmul(outputs, keys)                                           # (B, 1, E)


BUGS = ("pool-over-features",)
TWINS = ("scores-viewed",)
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    keys_length = torch.tensor([[T], [T - 2]] + [[T]] * (B - 2))
    return AttentionSequencePoolingLayer(D, bug).eval(), (torch.randn(B, 1, D), torch.randn(B, T, D), keys_length)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

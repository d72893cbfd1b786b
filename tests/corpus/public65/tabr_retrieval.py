"""yandex-research/tabular-dl-tabr, bin/tabr.py (``Model._encode``, ``Model.forward``; TabR, ICLR 2024) with the
``faiss.IndexFlatL2`` search written as ``torch.cdist`` and ``topk``: retrieval-augmented attention for tabular
rows. Each row of the batch is a query; its keys are the ``context_size`` nearest of the candidate rows (in training
the batch's own rows are prepended to the candidates and each row's own hit is pushed out with ``inf``, then
``context_idx.gather(-1, distances.argsort()[:, :-1])``). ``context_k = candidate_k[context_idx]`` ``(B, S, D)``;
the similarity is the negative squared L2 distance, ``-k.square().sum(-1, keepdim=True) + (2 * (k[..., None, :] @
context_k.transpose(-1, -2))).squeeze(-2) - context_k.square().sum(-1)`` ``(B, S)``, ``F.softmax(similarities,
dim=-1)`` over each row's context; the values are the context labels' embeddings plus ``T(k[:, None] - context_k)``
and ``context_x = (probs[:, None] @ values).squeeze(1)`` ``(B, D)`` is added to the row's representation.

Bugs: ``softmax-over-batch``: ``F.softmax(similarities, dim=0)`` (each context slot normalised across the rows of
the batch: the rows, which attend nothing of each other in TabR, are the softmax's axis); ``self-not-excluded``:
the training path keeps each row's own hit (its distance left finite, the last of the ``S + 1`` dropped instead):
every row retrieves itself and reads its own label (the leak TabR's ``inf`` is there for)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, n_num_features, d_main, d_block, context_size, bug=""):
        super().__init__()
        self.context_size, self.bug = context_size, bug
        self.linear = nn.Linear(n_num_features, d_main)
        self.blocks0 = nn.ModuleList([nn.Sequential(nn.LayerNorm(d_main), nn.Linear(d_main, d_block), nn.ReLU(),
                                                    nn.Linear(d_block, d_main))])
        self.normalization = nn.LayerNorm(d_main)
        self.K = nn.Linear(d_main, d_main)
        self.label_encoder = nn.Linear(1, d_main)
        self.T = nn.Sequential(nn.Linear(d_main, d_block), nn.ReLU(), nn.Linear(d_block, d_main, bias=False))
        self.dropout = nn.Dropout(0.0)
        self.head = nn.Sequential(nn.LayerNorm(d_main), nn.ReLU(), nn.Linear(d_main, 1))

    def _encode(self, x_):                                                       # (n, F_in)
        x = self.linear(x_)                                                      # (n, D)
        for block in self.blocks0:
            x = x + block(x)
        return x, self.K(self.normalization(x))                                  # (n, D), (n, D)

    def forward(self, x_, y, candidate_x_, candidate_y, is_train=True):
        with torch.no_grad():
            candidate_k = self._encode(candidate_x_)[1]                          # (N, D)
        x, k = self._encode(x_)                                                  # (B, D), (B, D)
        batch_size = k.shape[0]
        if is_train:
            candidate_k = torch.cat([k, candidate_k])                            # (B + N, D)
            candidate_y = torch.cat([y, candidate_y])                            # (B + N,)
        with torch.no_grad():
            distances, context_idx = torch.cdist(k, candidate_k).square().topk(
                self.context_size + (1 if is_train else 0), dim=-1, largest=False)   # (B, S + 1)
            if is_train:
                if self.bug != "self-not-excluded":
                    distances[context_idx == torch.arange(batch_size)[:, None]] = torch.inf
                context_idx = context_idx.gather(-1, distances.argsort()[:, :-1])   # (B, S)
        context_k = candidate_k[context_idx]                                     # (B, S, D)
        similarities = (
            -k.square().sum(-1, keepdim=True)                                    # (B, 1)
            + (2 * (k[..., None, :] @ context_k.transpose(-1, -2))).squeeze(-2)  # (B, S)
            - context_k.square().sum(-1)                                         # (B, S)
        )
        probs = F.softmax(similarities, dim=0 if self.bug == "softmax-over-batch" else -1)   # (B, S)
        probs = self.dropout(probs)
        context_y_emb = self.label_encoder(candidate_y[context_idx][..., None])  # (B, S, D)
        values = context_y_emb + self.T(k[:, None] - context_k)                  # (B, S, D)
        context_x = (probs[:, None] @ values).squeeze(1)                         # (B, D)
        return self.head(x + context_x)                                          # (B, 1)


BUGS = ("softmax-over-batch", "self-not-excluded")
TWINS = ()
DIMS = ("B=6 N=10 S=3 D=32",)   # (B: the query rows; N: the candidate rows; S: each row's context)
EQUAL = {DIMS[0]: "B=4 N=4 S=4 D=32"}


def build(bug="", B=6, N=10, S=3, D=32):  # noqa: N803
    torch.manual_seed(0)
    model = Model(5, D, 2 * D, S, bug).eval()
    return model, (torch.randn(B, 5), torch.randn(B), torch.randn(N, 5), torch.randn(N))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers, src/transformers/models/reformer/modeling_reformer.py (v4.40, ``LSHSelfAttention``,
one hash round, no chunk look-back): shared query/key vectors hashed by ``argmax`` of a random rotation
(``torch.cat([rotated, -rotated], dim=-1).argmax(dim=-1)``), tokens sorted by ``bucket * T + position`` with
``argsort``, ``_gather_by_expansion`` (``idxs.unsqueeze(-1).expand(-1, -1, -1, d)`` then ``gather(2, ...)``),
attention inside chunks of the sorted order (keys normalised, a token kept from attending to itself unless
alone), then put back in token order with the inverse permutation (``undo_sorted_bucket_idx =
sorted_bucket_idx.argsort(dim=-1)``, gathered the same way).

Bugs (argument): ``restore-forgotten``: the outputs left in sorted order (the undo gather dropped: token i gets
the output of whichever token sorted to place i; reports on LSH ports whose outputs come back "shuffled")."""

import sys

import torch
from torch import nn


def gather_by_expansion(vectors, idxs):                                          # (B, H, T, d), (B, H, T)
    expanded = idxs.unsqueeze(-1).expand(-1, -1, -1, vectors.shape[-1])
    return torch.gather(vectors, 2, expanded)


class LSHSelfAttention(nn.Module):
    def __init__(self, dim, heads, num_buckets=2, chunk_length=3, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.num_buckets, self.chunk_length = num_buckets, chunk_length
        self.query_key, self.value = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.output = nn.Linear(dim, dim)
        self.register_buffer("rotations", torch.randn(self.head_dim, num_buckets // 2), persistent=False)

    def split_heads(self, x):
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)

    def forward(self, hidden_states):                                            # (B, T, D)
        B, T, _ = hidden_states.shape
        qk, v = self.split_heads(self.query_key(hidden_states)), self.split_heads(self.value(hidden_states))
        rotated = torch.einsum("bhtd,dr->bhtr", qk, self.rotations)
        buckets = torch.cat([rotated, -rotated], dim=-1).argmax(dim=-1)         # (B, H, T)
        ticker = torch.arange(T).expand(B, self.heads, T)
        sorted_bucket_idx = torch.argsort(buckets * T + ticker, dim=-1)         # (B, H, T)
        undo_sorted_bucket_idx = sorted_bucket_idx.argsort(dim=-1)
        sorted_qk, sorted_v = gather_by_expansion(qk, sorted_bucket_idx), gather_by_expansion(v, sorted_bucket_idx)
        n_chunks = T // self.chunk_length
        q = sorted_qk.reshape(B, self.heads, n_chunks, self.chunk_length, self.head_dim)
        k = q / q.norm(dim=-1, keepdim=True)
        vc = sorted_v.reshape(B, self.heads, n_chunks, self.chunk_length, self.head_dim)
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.head_dim**0.5      # (B, H, n, c, c)
        self_mask = torch.eye(self.chunk_length, dtype=torch.bool)
        scores = scores.masked_fill(self_mask, -1e5)
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, vc).reshape(B, self.heads, T, self.head_dim)   # sorted order
        if self.bug != "restore-forgotten":
            out = gather_by_expansion(out, undo_sorted_bucket_idx)
        out = out.transpose(1, 2).reshape(B, T, -1)
        return self.output(out)


BUGS = ("restore-forgotten",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {"B=2 T=6 D=32 H=4": "B=4 T=6 D=32 H=4"}


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return LSHSelfAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers, src/transformers/models/reformer/modeling_reformer.py (v4.46,
``LocalSelfAttention.forward``, ``_compute_attn_mask``, and ``EfficientAttentionMixin._look_adjacent``,
``_split_hidden_size_dim``, ``_split_seq_length_dim_to``, ``_merge_hidden_size_dims``): the Reformer's chunked local
attention in a causal (``is_decoder``) layer. Heads by ``view(B, T, H, d).transpose(2, 1)``; queries, keys, values
and the token indices ``arange(T).repeat(B, H, 1)`` cut into chunks by ``reshape(B, H, -1, chunk_length, d)``;
keys, values and key indices given one chunk of look-back (``local_num_chunks_before=1``) by ``_look_adjacent``
(``cat([vectors[:, :, i:, ...], vectors[:, :, :i, ...]], dim=2)`` for ``i = -1``, then ``cat`` with the chunk itself
on dim 3); keys scaled by ``1 / sqrt(d)``; ``matmul(q, k.transpose(-1, -2))`` ``(B, H, n, K, 2K)``; the mask: the
padding chunked and looked back the same way, ``unsqueeze(-2).expand``, times the causal ``ge(query_indices
.unsqueeze(-1), key_indices.unsqueeze(-2))``; ``torch.where(mask, dots, -1e9)``, ``exp(dots - logsumexp(dots, -1,
keepdim=True))``, ``matmul`` with v, ``flatten(2, 3)``, ``permute(0, 2, 1, 3).reshape(B, T, H * d)``, ``output``.

Bugs: ``look-adjacent-next``: ``_look_adjacent`` rolled the other way, ``cat([vectors[:, :, -i:, ...], vectors[:, :,
:-i, ...]], dim=2)`` (each chunk gets the next chunk as its "previous" one; the key indices roll the same way, so the
causal mask hides all of it: every token loses its look-back and sees only its own chunk); ``causal-le``: the
causal mask ``le(query_indices.unsqueeze(-1), key_indices.unsqueeze(-2))`` (the comparison reversed: each token
reads itself and the later tokens of its window)."""

import sys

import torch
from torch import nn


class LocalSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, chunk_length, bug=""):
        super().__init__()
        self.num_attention_heads, self.chunk_length, self.bug = num_attention_heads, chunk_length, bug
        self.attention_head_size = hidden_size // num_attention_heads
        self.all_head_size = hidden_size
        self.num_chunks_before, self.num_chunks_after = 1, 0
        self.query = nn.Linear(hidden_size, hidden_size, bias=False)
        self.key = nn.Linear(hidden_size, hidden_size, bias=False)
        self.value = nn.Linear(hidden_size, hidden_size, bias=False)
        self.output = nn.Linear(hidden_size, hidden_size, bias=False)

    def _look_adjacent(self, vectors):
        slices = []
        for i in range(-self.num_chunks_before, self.num_chunks_after + 1):
            if i == 0:
                slices.append(vectors)
            elif self.bug == "look-adjacent-next":
                slices.append(torch.cat([vectors[:, :, -i:, ...], vectors[:, :, :-i, ...]], dim=2))
            else:
                slices.append(torch.cat([vectors[:, :, i:, ...], vectors[:, :, :i, ...]], dim=2))
        return torch.cat(slices, dim=3)                                              # (B, H, n, 2K, ...)

    def _split_hidden_size_dim(self, x):
        x = x.view(x.size()[:-1] + (self.num_attention_heads, self.attention_head_size))   # (B, T, H, d)
        return x.transpose(2, 1)                                                     # (B, H, T, d)

    def _split_seq_length_dim_to(self, vectors, num_heads):
        split_dim_shape = (vectors.shape[0], num_heads, -1, self.chunk_length)
        if vectors.ndim == 4:
            return torch.reshape(vectors, split_dim_shape + (self.attention_head_size,))   # (B, H, n, K, d)
        return torch.reshape(vectors, split_dim_shape)                               # (B, H, n, K)

    def _compute_attn_mask(self, query_indices, key_indices, attention_mask, query_key_dot_shape):
        attention_mask = attention_mask.to(torch.bool)[:, None, :]                   # (B, 1, T)
        attention_mask = self._look_adjacent(self._split_seq_length_dim_to(attention_mask, 1))   # (B, 1, n, 2K)
        attention_mask = attention_mask.unsqueeze(-2).expand(query_key_dot_shape)    # (B, H, n, K, 2K)
        if self.bug == "causal-le":
            causal_mask = torch.le(query_indices.unsqueeze(-1), key_indices.unsqueeze(-2))
        else:
            causal_mask = torch.ge(query_indices.unsqueeze(-1), key_indices.unsqueeze(-2))   # (B, H, n, K, 2K)
        return causal_mask * attention_mask

    def forward(self, hidden_states, attention_mask):
        batch_size, sequence_length = hidden_states.shape[:2]
        query_vectors = self._split_hidden_size_dim(self.query(hidden_states))       # (B, H, T, d)
        key_vectors = self._split_hidden_size_dim(self.key(hidden_states))
        value_vectors = self._split_hidden_size_dim(self.value(hidden_states))
        query_vectors = self._split_seq_length_dim_to(query_vectors, self.num_attention_heads)   # (B, H, n, K, d)
        key_vectors = self._split_seq_length_dim_to(key_vectors, self.num_attention_heads)
        value_vectors = self._split_seq_length_dim_to(value_vectors, self.num_attention_heads)
        indices = torch.arange(sequence_length).repeat(batch_size, self.num_attention_heads, 1)   # (B, H, T)
        query_indices = self._split_seq_length_dim_to(indices, self.num_attention_heads)         # (B, H, n, K)
        key_indices = self._look_adjacent(self._split_seq_length_dim_to(indices, self.num_attention_heads))
        key_vectors = self._look_adjacent(key_vectors)                               # (B, H, n, 2K, d)
        value_vectors = self._look_adjacent(value_vectors)
        key_vectors = key_vectors / (self.attention_head_size ** 0.5)
        query_key_dots = torch.matmul(query_vectors, key_vectors.transpose(-1, -2))  # (B, H, n, K, 2K)
        mask = self._compute_attn_mask(query_indices, key_indices, attention_mask, query_key_dots.shape)
        query_key_dots = torch.where(mask, query_key_dots, torch.tensor(-1e9))
        logits = torch.logsumexp(query_key_dots, dim=-1, keepdim=True)
        attention_probs = torch.exp(query_key_dots - logits)
        out_vectors = torch.matmul(attention_probs, value_vectors)                   # (B, H, n, K, d)
        out_vectors = out_vectors.flatten(start_dim=2, end_dim=3)                    # (B, H, T, d)
        out_vectors = out_vectors.permute(0, 2, 1, 3).reshape(batch_size, sequence_length, self.all_head_size)
        return self.output(out_vectors)                                              # (B, T, D)


BUGS = ("look-adjacent-next", "causal-le")
TWINS = ()
DIMS = ("B=2 T=15 D=32 H=4 K=5",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 K=2"}


def build(bug="", B=2, T=15, D=32, H=4, K=5):  # noqa: N803
    """``K`` the chunk length (``local_attn_chunk_length``); the second sequence's last two tokens are padding."""
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1:, -2:] = 0
    return LocalSelfAttention(D, H, K, bug=bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

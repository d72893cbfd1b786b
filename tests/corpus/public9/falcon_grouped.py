"""huggingface/transformers, src/transformers/models/falcon/modeling_falcon.py (``FalconAttention``, the
``new_decoder_architecture`` branch of ``_split_heads`` used by Falcon-40B/180B;
https://github.com/huggingface/transformers/blob/main/src/transformers/models/falcon/modeling_falcon.py): one
``query_key_value`` projection of width ``(num_heads + 2 * num_kv_heads) * head_dim`` viewed ``(batch, seq_len,
-1, num_heads // num_kv_heads + 2, head_dim)``: per key/value group its n_rep query heads, then its key head,
then its value head; ``qkv[:, :, :, :-2]``, ``qkv[:, :, :, [-2]]``, ``qkv[:, :, :, [-1]]``, the key and value
``torch.broadcast_to(key, query.shape)`` and all three ``flatten(2, 3)`` to H heads; SDPA, causal.

Bugs (argument): ``kv-tiled``: the group's single key and value heads flattened first and widened with
``repeat(1, 1, n_rep, 1)`` (Mistral's and Llama's ``repeat_kv`` written with ``repeat``, the tiling slip of
transformers PR #26447's review): head h reads group h mod H_kv while the queries are group-major;
``merge-no-transpose``: SDPA's ``(B, H, T, d)`` output merged ``reshape(B, T, H * d)`` without the
``transpose(1, 2)`` (transformer-from-scratch PR #6's question); ``kv-same-slot``: the values picked
``qkv[:, :, :, [-2]]``, each group's key slot (a copy-paste slip of the picks): the values are the keys;
``kv-copies-outside``: the key and value heads widened ``expand(..., n_rep, ...)`` then moved ahead of the
groups (``transpose(2, 3)``) before ``flatten(2, 3)``: the same tiling as ``kv-tiled``, with no ``repeat``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("kv-tiled", "merge-no-transpose", "kv-same-slot", "kv-copies-outside")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4 H_kv=2",)


class FalconAttention(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, num_kv_heads=2, bug=""):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.bug = num_heads, num_kv_heads, bug
        self.head_dim = hidden_size // num_heads
        qkv_out_dim = (num_kv_heads * 2 + num_heads) * self.head_dim
        self.query_key_value = nn.Linear(hidden_size, qkv_out_dim, bias=False)
        self.dense = nn.Linear(hidden_size, hidden_size, bias=False)

    def _split_heads(self, fused_qkv):
        batch, seq_len, _ = fused_qkv.shape
        n_rep = self.num_heads // self.num_kv_heads
        qkv = fused_qkv.view(batch, seq_len, -1, n_rep + 2, self.head_dim)  # (B, T, H_kv, n_rep+2, d)
        query = qkv[:, :, :, :-2]                                           # (B, T, H_kv, n_rep, d)
        key = qkv[:, :, :, [-2]]                                            # (B, T, H_kv, 1, d)
        value = qkv[:, :, :, [-2 if self.bug == "kv-same-slot" else -1]]    # (B, T, H_kv, 1, d)
        if self.bug == "kv-tiled":
            key = key.flatten(2, 3).repeat(1, 1, n_rep, 1)                  # bug: (B, T, n_rep·H_kv, d)
            value = value.flatten(2, 3).repeat(1, 1, n_rep, 1)              # bug: (B, T, n_rep·H_kv, d)
            return query.flatten(2, 3), key, value
        if self.bug == "kv-copies-outside":
            key = key.expand(-1, -1, -1, n_rep, -1).transpose(2, 3)         # bug: (B, T, n_rep, H_kv, d)
            value = value.expand(-1, -1, -1, n_rep, -1).transpose(2, 3)     # bug: (B, T, n_rep, H_kv, d)
        else:
            key = torch.broadcast_to(key, query.shape)                      # (B, T, H_kv, n_rep, d)
            value = torch.broadcast_to(value, query.shape)                  # (B, T, H_kv, n_rep, d)
        query, key, value = [x.flatten(2, 3) for x in (query, key, value)]  # (B, T, H, d) each
        return query, key, value

    def forward(self, hidden_states):
        batch_size, query_length, _ = hidden_states.shape
        query, key, value = self._split_heads(self.query_key_value(hidden_states))
        query, key, value = (x.transpose(1, 2) for x in (query, key, value))  # (B, H, T, d) each
        attn_output = F.scaled_dot_product_attention(query, key, value, is_causal=True)  # (B, H, T, d)
        if self.bug != "merge-no-transpose":
            attn_output = attn_output.transpose(1, 2)                       # (B, T, H, d)
        attn_output = attn_output.reshape(batch_size, query_length, self.num_heads * self.head_dim)  # (B, T, D)
        return self.dense(attn_output)


def build(bug="", B=2, T=5, D=32, H=4, H_kv=2):
    """--dims 'B=2 T=5 D=32 H=4 H_kv=2'."""
    torch.manual_seed(0)
    return FalconAttention(D, H, H_kv, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

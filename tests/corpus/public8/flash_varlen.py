"""huggingface/transformers, src/transformers/modeling_flash_attention_utils.py (``_get_unpad_data``,
``_upad_input``, ``_flash_attention_forward``) with flash-attn's flash_attn/bert_padding.py
(``index_first_axis``, ``pad_input``;
https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_flash_attention_utils.py,
https://github.com/Dao-AILab/flash-attention/blob/main/flash_attn/bert_padding.py), as Llama's
``LlamaFlashAttention2`` calls it: the projections viewed ``(bsz, q_len, H, d)`` and, after rotary's
``transpose(1, 2)``, put back ``transpose(1, 2)`` ("Flash attention requires the input to have the shape
batch_size x seq_length x head_dim x hidden_dim"); unpadding: ``seqlens_in_batch =
attention_mask.sum(dim=-1, dtype=torch.int32)``, ``indices = torch.nonzero(attention_mask.flatten(),
as_tuple=False).flatten()``, ``cu_seqlens = F.pad(torch.cumsum(seqlens_in_batch, dim=0), (1, 0))``;
``index_first_axis(key_layer.reshape(batch_size * kv_seq_len, H, d), indices_k)`` (a gather along the
folded (B·T) axis); ``flash_attn_varlen_func`` (here a CPU reference that attends within each
``cu_seqlens`` segment, ``is_causal``); ``pad_input``: ``output = torch.zeros(batch * seqlen, ...)``,
``output[indices] = hidden_states``, ``output.view(batch, seqlen, ...)``.

Bugs (argument): ``no-transpose-before-flash``: the states passed to ``_flash_attention_forward`` still
``(B, H, T, d)`` (the transpose back forgotten, transformers issue #26877's class of report): the fold
``reshape(batch_size * kv_seq_len, -1, head_dim)`` then mixes heads and tokens; ``seqlens-over-batch``:
``attention_mask.sum(dim=0)`` (the segment lengths counted down the batch: segments then cut across
sequences); ``pad-back-seq-major``: ``pad_input`` folded back ``output.view(seqlen, batch, ...)`` and
transposed (the rows were batch-major)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("no-transpose-before-flash", "seqlens-over-batch", "pad-back-seq-major")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def _get_unpad_data(attention_mask, bug=""):
    seqlens_in_batch = attention_mask.sum(dim=0 if bug == "seqlens-over-batch" else -1, dtype=torch.int32)
    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()
    max_seqlen_in_batch = seqlens_in_batch.max().item()
    cu_seqlens = F.pad(torch.cumsum(seqlens_in_batch, dim=0, dtype=torch.int32), (1, 0))
    return indices, cu_seqlens, max_seqlen_in_batch


def index_first_axis(x, indices):
    return x[indices]  # (nnz, H, d)


def pad_input(hidden_states, indices, batch, seqlen, bug=""):
    dim = hidden_states.shape[1:]
    output = torch.zeros((batch * seqlen), *dim, dtype=hidden_states.dtype)
    output[indices] = hidden_states
    if bug == "pad-back-seq-major":
        return output.view(seqlen, batch, *dim).transpose(0, 1)  # bug: the rows were batch-major
    return output.view(batch, seqlen, *dim)  # (B, T, H, d)


def flash_attn_varlen_reference(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=True):
    """What ``flash_attn_varlen_func`` computes, one packed sequence at a time (CPU)."""
    outs = []
    bounds_q, bounds_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for (q0, q1), (k0, k1) in zip(zip(bounds_q, bounds_q[1:]), zip(bounds_k, bounds_k[1:])):
        qi, ki, vi = q[q0:q1].transpose(0, 1), k[k0:k1].transpose(0, 1), v[k0:k1].transpose(0, 1)  # (H, t, d)
        outs.append(F.scaled_dot_product_attention(qi, ki, vi, is_causal=causal).transpose(0, 1))  # (t, H, d)
    return torch.cat(outs, dim=0)  # (nnz, H, d)


def _upad_input(query_layer, key_layer, value_layer, attention_mask, query_length, bug=""):
    indices_k, cu_seqlens_k, max_seqlen_in_batch_k = _get_unpad_data(attention_mask, bug)
    batch_size, kv_seq_len, num_key_value_heads, head_dim = key_layer.shape
    key_layer = index_first_axis(key_layer.reshape(batch_size * kv_seq_len, num_key_value_heads, head_dim), indices_k)
    value_layer = index_first_axis(
        value_layer.reshape(batch_size * kv_seq_len, num_key_value_heads, head_dim), indices_k
    )  # (nnz, H, d)
    query_layer = index_first_axis(query_layer.reshape(batch_size * kv_seq_len, -1, head_dim), indices_k)
    return query_layer, key_layer, value_layer, indices_k, cu_seqlens_k


def _flash_attention_forward(query_states, key_states, value_states, attention_mask, query_length, bug=""):
    batch_size = query_states.shape[0]
    query_states, key_states, value_states, indices_q, cu_seqlens = _upad_input(
        query_states, key_states, value_states, attention_mask, query_length, bug
    )
    attn_output_unpad = flash_attn_varlen_reference(query_states, key_states, value_states, cu_seqlens, cu_seqlens)
    return pad_input(attn_output_unpad, indices_q, batch_size, query_length, bug)  # (B, T, H, d)


class LlamaFlashAttention2(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        # (rotary would go here, on (B, H, T, d))
        if self.bug != "no-transpose-before-flash":
            query_states = query_states.transpose(1, 2)  # (B, T, H, d)
            key_states = key_states.transpose(1, 2)
            value_states = value_states.transpose(1, 2)
        attn_output = _flash_attention_forward(query_states, key_states, value_states, attention_mask, q_len, self.bug)
        attn_output = attn_output.reshape(bsz, q_len, -1).contiguous()  # (B, T, D)
        return self.o_proj(attn_output)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4': hidden states (B, T, D) and a right-padded mask (B, T), the last entry's
    last two tokens padding (at B = 1 nothing is padded)."""
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    if B > 1:
        mask[-1, -2:] = 0
    return LlamaFlashAttention2(D, H, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

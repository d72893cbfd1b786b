"""vllm-project/vllm-omni issue #5865 ("[Bug] FLASH_ATTN mishandles cross-attention key-padding masks when
query_len != key_len", closed, labels bug): the varlen path's ``_upad_input``, written for self-attention, sliced
the key-padding mask with ``attention_mask[:, -query_length:]`` and unpadded the *image queries* with the *text
keys'* mask; only the query rows whose flat index fell on a kept key position survived, and ``_pad_input``
scattered every other query row back as zeros ("the prompt conditioning is effectively dropped").

The idiom, written in torch: the HF-derived helpers (``_get_unpad_data``: ``indices`` by ``nonzero`` of the
flattened mask, ``cu_seqlens`` by ``cumsum``; ``index_first_axis``; ``pad_input`` by an ``index_put`` into zeros),
a varlen attention run sequence by sequence over ``cu_seqlens`` (``flash_attn_varlen_func``'s contract), a
diffusion block's prompt cross-attention: ``to_q`` on the image tokens ``[B, T, D]``, ``to_k``/``to_v`` on the
text ``[B, S, D]`` with its padding mask ``[B, S]``, ``to_out``.

Bug (a mask of one axis on another): ``query-unpadded-by-key-mask``: the issue's else-branch, the queries
unpadded and padded back by the key mask's indices; the fix leaves the (unpadded) queries whole."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("query-unpadded-by-key-mask",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 S=4",)


def _get_unpad_data(attention_mask):
    seqlens = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    return indices, cu_seqlens


def index_first_axis(x, indices):
    return x.reshape(-1, *x.shape[2:])[indices]


def pad_input(x, indices, batch, seqlen):
    out = x.new_zeros(batch * seqlen, *x.shape[1:])
    out[indices] = x
    return out.view(batch, seqlen, *x.shape[1:])


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, scale):
    """``flash_attn_varlen_func`` without the kernel: each sequence's queries over its own keys."""
    outs = []
    for i in range(len(cu_seqlens_k) - 1):
        qi = q[cu_seqlens_q[i]:cu_seqlens_q[i + 1]].transpose(0, 1)                   # (H, Tq_i, d)
        ki = k[cu_seqlens_k[i]:cu_seqlens_k[i + 1]].transpose(0, 1)
        vi = v[cu_seqlens_k[i]:cu_seqlens_k[i + 1]].transpose(0, 1)
        probs = torch.softmax(torch.matmul(qi, ki.transpose(-1, -2)) * scale, dim=-1)
        outs.append(torch.matmul(probs, vi).transpose(0, 1))                           # (Tq_i, H, d)
    return torch.cat(outs, dim=0)


class CrossAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.heads, self.head_dim = heads, dim // heads
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.to_out = nn.Linear(dim, dim)

    def _upad_input(self, q, k, v, attention_mask, query_length):
        batch, kv_len = attention_mask.shape
        indices_k, cu_seqlens_k = _get_unpad_data(attention_mask)
        k, v = index_first_axis(k, indices_k), index_first_axis(v, indices_k)
        if self.bug == "query-unpadded-by-key-mask":
            attention_mask = attention_mask[:, -query_length:]
            indices_q, cu_seqlens_q = _get_unpad_data(attention_mask)
            q = index_first_axis(q, indices_q)
        else:
            indices_q = torch.arange(batch * query_length)
            cu_seqlens_q = torch.arange(0, (batch + 1) * query_length, query_length, dtype=torch.int32)
            q = q.reshape(batch * query_length, *q.shape[2:])
        return q, k, v, indices_q, cu_seqlens_q, cu_seqlens_k

    def forward(self, hidden_states, encoder_hidden_states, encoder_attention_mask):
        B, T, _ = hidden_states.shape
        S = encoder_hidden_states.shape[1]
        q = self.to_q(hidden_states).view(B, T, self.heads, self.head_dim)
        k = self.to_k(encoder_hidden_states).view(B, S, self.heads, self.head_dim)
        v = self.to_v(encoder_hidden_states).view(B, S, self.heads, self.head_dim)
        q, k, v, indices_q, cu_q, cu_k = self._upad_input(q, k, v, encoder_attention_mask, T)
        out = varlen_attention(q, k, v, cu_q, cu_k, 1.0 / math.sqrt(self.head_dim))
        out = pad_input(out, indices_q, B, T).reshape(B, T, -1)
        return self.to_out(out)


def build(bug="", B=2, T=6, D=32, H=4, S=4):
    torch.manual_seed(0)
    lengths = torch.tensor([S, S - 2, S - 1, S][:B])
    text_mask = torch.arange(S)[None, :] < lengths[:, None]                             # (B, S) True on text
    return CrossAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D), torch.randn(B, S, D), text_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

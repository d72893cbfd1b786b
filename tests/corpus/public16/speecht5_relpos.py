"""huggingface/transformers, src/transformers/models/speecht5/modeling_speecht5.py (v4.40,
``SpeechT5RelativePositionalEncoding``, ``SpeechT5Attention``, ``SpeechT5Encoder``): ``pos_seq = arange(T)[:, None]
- arange(T)[None, :]``, clamped to ``[-max_length, max_length - 1]`` and shifted by ``max_length``, read from a
learned ``nn.Embedding(2 * max_length, head_dim)`` table (``pe_k``: ``(T, T, d)``); the attention is Bart's
(``q_proj(x) * scaling``, ``_shape``: ``view(bsz, seq_len, num_heads, head_dim).transpose(1, 2)``, flattened
``(bsz * num_heads, T, d)``, ``torch.bmm``), and the relative term is added as ``reshape_q =
query_states.contiguous().view(bsz * num_heads, -1, head_dim).transpose(0, 1)`` (``(T, B*H, d)``), ``rel_pos_bias
= torch.matmul(reshape_q, position_bias.transpose(-2, -1))`` (``(T, B*H, T)``), ``.transpose(0, 1).view(bsz *
num_heads, T, T)``, ``attn_weights += rel_pos_bias``; softmax, ``bmm`` with v, ``out_proj``.

Bugs (argument): ``bias-view-without-transpose``: ``rel_pos_bias.view(bsz * num_heads, T, T)`` straight from
``(T, B*H, T)`` (the ``transpose(0, 1)`` back dropped: each head's bias rows come from other heads and queries);
twin ``pos-seq-reversed``: ``pos_seq = arange(T)[None, :] - arange(T)[:, None]`` (k - q where q - k is written:
with a learned table and a clamp symmetric up to one slot this reads the table mirrored, which training learns
alike: a twin, not a bug)."""

import sys

import torch
from torch import nn


class SpeechT5RelativePositionalEncoding(nn.Module):
    def __init__(self, dim, max_length=4, bug=""):
        super().__init__()
        self.max_length, self.bug = max_length, bug
        self.pe_k = nn.Embedding(2 * max_length, dim)

    def forward(self, hidden_states):                                              # (B, T, D)
        seq_len = hidden_states.shape[1]
        pos_seq = torch.arange(0, seq_len).long()
        if self.bug == "pos-seq-reversed":
            pos_seq = pos_seq[None, :] - pos_seq[:, None]
        else:
            pos_seq = pos_seq[:, None] - pos_seq[None, :]                          # (T, T)
        pos_seq[pos_seq < -self.max_length] = -self.max_length
        pos_seq[pos_seq >= self.max_length] = self.max_length - 1
        pos_seq = pos_seq + self.max_length
        return self.pe_k(pos_seq)                                                  # (T, T, d)


class SpeechT5Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim, self.bug = dim, heads, dim // heads, bug
        self.scaling = self.head_dim**-0.5
        self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.q_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, position_bias):                               # (B, T, D), (T, T, d)
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)              # (B, H, T, d)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)  # (B*H, T, d)
        key_states = key_states.view(*proj_shape)
        value_states = value_states.view(*proj_shape)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))        # (B*H, T, T)
        reshape_q = query_states.contiguous().view(bsz * self.num_heads, -1, self.head_dim).transpose(0, 1)
        rel_pos_bias = torch.matmul(reshape_q, position_bias.transpose(-2, -1))    # (T, B*H, T)
        if self.bug != "bias-view-without-transpose":
            rel_pos_bias = rel_pos_bias.transpose(0, 1)                            # (B*H, T, T)
        rel_pos_bias = rel_pos_bias.view(bsz * self.num_heads, position_bias.size(0), position_bias.size(1))
        attn_weights += rel_pos_bias
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)                        # (B*H, T, d)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)            # (B, T, D)
        return self.out_proj(attn_output)


class SpeechT5Encoder(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.layer_norm = nn.LayerNorm(dim)
        self.embed_positions = SpeechT5RelativePositionalEncoding(dim // heads, bug=bug)
        self.attention = SpeechT5Attention(dim, heads, bug)

    def forward(self, hidden_states):                                              # (B, T, D)
        hidden_states = self.layer_norm(hidden_states)
        position_bias = self.embed_positions(hidden_states)
        return hidden_states + self.attention(hidden_states, position_bias)


BUGS = ("bias-view-without-transpose",)
TWINS = ("pos-seq-reversed",)
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {"B=2 T=6 D=32 H=4": "B=2 T=8 D=32 H=4"}   # (B*H = T: the view back mixes axes of one size)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return SpeechT5Encoder(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

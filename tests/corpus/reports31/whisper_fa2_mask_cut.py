"""huggingface/transformers pull request #36477 ("Fix incorrect attention mask truncate in
WhisperFlashAttention2", merged; it addresses issue #36585): ``WhisperFlashAttention2`` moves its keys to the
layout flash attention takes, ``(batch, seq, heads, head_dim)``, and then cut the decoder's 2-D padding mask
to ``attention_mask[:, : key_states.shape[-2]]`` (the line copied from the eager and sdpa classes, whose keys
are ``(batch, heads, seq, head_dim)``): in this layout ``shape[-2]`` is the number of *heads*, so the mask kept
``num_heads`` columns, and flash attention's unpadding read the sequences' lengths and the tokens' row
indices from that cut mask (the PR: "in ``WhisperFlashAttention2`` the dimensions have been transposed"; the
fix reads ``key_states.shape[-3]``). Training with a ``decoder_attention_mask`` gave wrong attention.

The idiom (Whisper's decoder layer on the flash-attention path; ``flash_attn_varlen_func`` written here in
torch, one sequence at a time): ``q_proj`` reshaped straight to ``(bsz, tgt_len, H, d)``, keys and values by
``_shape`` (``view(bsz, seq, H, d).transpose(1, 2)``) and transposed back to ``(bsz, seq, H, d)``, the mask cut
to the keys' length, ``_upad_input`` (``_get_unpad_data``: lengths from ``mask.sum(-1)``, row indices from
``nonzero(mask.flatten())``, ``cu_seqlens`` from ``cumsum``; ``index_first_axis`` on the ``(bsz * seq, H, d)``
rows), causal attention over each unpadded sequence, ``pad_input`` back to ``(bsz, seq, H, d)``,
``reshape(bsz, tgt_len, -1)``, ``out_proj``; pre-LayerNorm, the residual and the GELU feed-forward.

Bug (mask axis): ``mask-cut-by-heads``: ``attention_mask[:, : key_states.shape[-2]]`` on the flash layout."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("mask-cut-by-heads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def _get_unpad_data(attention_mask):
    seqlens_in_batch = attention_mask.sum(dim=-1, dtype=torch.int32)                      # (B,)
    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()
    cu_seqlens = F.pad(torch.cumsum(seqlens_in_batch, dim=0, dtype=torch.int32), (1, 0))
    return indices, cu_seqlens


def index_first_axis(x, indices):
    return x[indices]


def flash_attn_varlen_func(q, k, v, cu_seqlens, causal=True):
    """(total, H, d) each; attention within each [cu_seqlens[i], cu_seqlens[i+1]) run of rows."""
    outs = []
    for start, end in zip(cu_seqlens[:-1].tolist(), cu_seqlens[1:].tolist()):
        qs, ks, vs = (x[start:end].transpose(0, 1) for x in (q, k, v))                        # (H, L, d_k)
        outs.append(F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal).transpose(0, 1))  # (L, H, d_k)
    return torch.cat(outs, dim=0)


def pad_input(hidden_states, indices, batch, seqlen):
    output = hidden_states.new_zeros(batch * seqlen, *hidden_states.shape[1:])
    output[indices] = hidden_states
    return output.view(batch, seqlen, *hidden_states.shape[1:])                               # (B, T, H, d_k)


def _flash_attention_forward(query_states, key_states, value_states, attention_mask, query_length):
    batch_size, kv_seq_len, num_heads, head_dim = key_states.shape
    indices, cu_seqlens = _get_unpad_data(attention_mask)
    key_layer = index_first_axis(key_states.reshape(batch_size * kv_seq_len, num_heads, head_dim), indices)
    value_layer = index_first_axis(value_states.reshape(batch_size * kv_seq_len, num_heads, head_dim), indices)
    query_layer = index_first_axis(query_states.reshape(batch_size * kv_seq_len, num_heads, head_dim), indices)
    attn_output_unpad = flash_attn_varlen_func(query_layer, key_layer, value_layer, cu_seqlens, causal=True)
    return pad_input(attn_output_unpad, indices, batch_size, query_length)


class WhisperFlashAttention2(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.bug, self.embed_dim, self.num_heads = bug, embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        shape = (bsz, tgt_len, self.num_heads, self.head_dim)
        query_states = torch.reshape(self.q_proj(hidden_states), shape)                     # (B, T, H, d_k)
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)                       # (B, H, T, d_k)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)                     # (B, H, T, d_k)
        key_states = key_states.transpose(1, 2)                                             # (B, T, H, d_k)
        value_states = value_states.transpose(1, 2)                                         # (B, T, H, d_k)
        cut = key_states.shape[-2] if self.bug == "mask-cut-by-heads" else key_states.shape[-3]
        causal_mask = attention_mask[:, :cut]                                               # (B, T)
        attn_output = _flash_attention_forward(query_states, key_states, value_states, causal_mask, tgt_len)
        attn_output = attn_output.reshape(bsz, tgt_len, -1)                                 # (B, T, D)
        return self.out_proj(attn_output)


class WhisperDecoderLayer(nn.Module):
    def __init__(self, d_model, heads, bug=""):
        super().__init__()
        self.self_attn = WhisperFlashAttention2(d_model, heads, bug=bug)
        self.self_attn_layer_norm = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)
        self.final_layer_norm = nn.LayerNorm(d_model)

    def forward(self, hidden_states, attention_mask):
        hidden_states = hidden_states + self.self_attn(self.self_attn_layer_norm(hidden_states), attention_mask)
        residual = hidden_states
        hidden_states = self.fc2(F.gelu(self.fc1(self.final_layer_norm(hidden_states))))
        return residual + hidden_states


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    lengths = torch.tensor([T] + [max(1, T - 2)] * (B - 1))
    decoder_attention_mask = (torch.arange(T)[None, :] < lengths[:, None]).long()             # (B, T)
    return WhisperDecoderLayer(D, H, bug=bug).eval(), (torch.randn(B, T, D), decoder_attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

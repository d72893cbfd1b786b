"""THUDM/ChatGLM-6B (the first ChatGLM), the hub's ``modeling_chatglm.py`` (``SelfAttention.forward``,
``attention_fn``, ``RotaryEmbedding``, ``apply_rotary_pos_emb_index``, ``ChatGLMModel.get_masks`` and
``get_position_ids``; https://huggingface.co/THUDM/chatglm-6b): GLM's attention, sequence-first ``[sq, b, h]``.
One ``query_key_value`` whose width is packed per head: ``view(sq, b, np, 3 * hn)`` and
``split_tensor_along_last_dim(..., 3)``; the 2D rotary (``position_encoding_2d``): each head cut in two with
``chunk(2, dim=-1)``, the first half rotated by the token positions (``position_ids[:, 0]``, every generated token
at the ``[gMASK]`` position), the second by the block positions (``position_ids[:, 1]``: 0 in the context, 1, 2, ...
after it), each through ``F.embedding(position_id, cos.squeeze(1)).unsqueeze(2)`` and ``rotate_half``;
``attention_fn`` divides the queries by ``sqrt(hn) * (layer_id + 1)`` (``query_key_layer_scaling_coeff``), folds
``[sq, b * np, hn]`` for ``baddbmm``, ``masked_fill_(mask, -10000.0)``, multiplies the coefficient back in float,
``softmax(dim=-1)``, ``bmm`` with the values, ``permute(2, 0, 1, 3)`` and the view to ``[sq, b, hp]``. The mask
(``get_masks``): ``tril`` of ones with every row seeing the whole context (``attention_mask[i, :, :context_length]
= 1``), then ``< 0.5``: bidirectional over the prompt, causal after it.

Bugs: ``qkv-split-flat``: the fused output cut into three blocks of the hidden width before the head view
(``chunk(3, dim=-1)`` then ``view(sq, b, np, hn)`` each: the Megatron per-head packing read as Llama's
``[q | k | v]``: every "query" head mixes one head's query, key and value columns); ``block-positions-ignored``: both
halves rotated by ``position_ids`` (the 1D rotary of ``position_encoding_2d=False`` kept for a 2D checkpoint: the
second half never learns where a generated token sits in its span); ``context-rows-open``: the context opened by rows,
``attention_mask[i, :context_length, :] = 1`` (the prompt's tokens see the generated span after them)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=x1.ndim - 1)


def apply_rotary_pos_emb_index(q, k, cos, sin, position_id):
    cos = F.embedding(position_id, cos.squeeze(1)).unsqueeze(2)                      # (sq, b, 1, hn/2)
    sin = F.embedding(position_id, sin.squeeze(1)).unsqueeze(2)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, seq_len):
        t = torch.arange(seq_len, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[:, None, :], emb.sin()[:, None, :]                            # (seq_len, 1, hn/2)


class SelfAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, layer_id, bug=""):
        super().__init__()
        self.num_attention_heads, self.layer_id, self.bug = num_attention_heads, layer_id, bug
        self.hidden_size_per_attention_head = hidden_size // num_attention_heads
        self.rotary_emb = RotaryEmbedding(hidden_size // (num_attention_heads * 2))
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states, position_ids, attention_mask):
        sq, b, hp = hidden_states.shape
        np_, hn = self.num_attention_heads, self.hidden_size_per_attention_head
        mixed_raw_layer = self.query_key_value(hidden_states)                         # (sq, b, 3 * hp)
        if self.bug == "qkv-split-flat":
            query_layer, key_layer, value_layer = [t.contiguous().view(sq, b, np_, hn)           # (sq, b, np, hn)
                                                   for t in mixed_raw_layer.chunk(3, dim=-1)]
        else:
            mixed_raw_layer = mixed_raw_layer.view(sq, b, np_, 3 * hn)                  # (sq, b, np, 3 * hn)
            query_layer, key_layer, value_layer = torch.split(mixed_raw_layer, hn, dim=-1)  # (sq, b, np, hn)
        q1, q2 = query_layer.chunk(2, dim=query_layer.ndim - 1)
        k1, k2 = key_layer.chunk(2, dim=key_layer.ndim - 1)
        cos, sin = self.rotary_emb(int(position_ids.max()) + 1)
        block_position_ids = position_ids[:, 1, :].transpose(0, 1).contiguous()       # (sq, b)
        position_ids = position_ids[:, 0, :].transpose(0, 1).contiguous()             # (sq, b)
        if self.bug == "block-positions-ignored":
            block_position_ids = position_ids
        q1, k1 = apply_rotary_pos_emb_index(q1, k1, cos, sin, position_ids)
        q2, k2 = apply_rotary_pos_emb_index(q2, k2, cos, sin, block_position_ids)
        query_layer = torch.concat([q1, q2], dim=q1.ndim - 1)                         # (sq, b, np, hn)
        key_layer = torch.concat([k1, k2], dim=k1.ndim - 1)
        coeff = float(self.layer_id + 1)
        query_layer = query_layer / (math.sqrt(hn) * coeff)
        output_size = (b, np_, sq, key_layer.size(0))                                 # (b, np, sq, sk)
        query_layer = query_layer.view(sq, b * np_, -1)                               # (sq, b * np, hn)
        key_layer = key_layer.view(key_layer.size(0), b * np_, -1)                    # (sk, b * np, hn)
        matmul_result = torch.zeros(1, 1, 1, dtype=query_layer.dtype)
        matmul_result = torch.baddbmm(matmul_result, query_layer.transpose(0, 1),
                                      key_layer.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=1.0)
        attention_scores = matmul_result.view(*output_size)                           # (b, np, sq, sk)
        attention_scores = attention_scores.masked_fill(attention_mask, -10000.0)
        attention_probs = F.softmax(attention_scores.float() * coeff, dim=-1)
        value_layer = value_layer.view(value_layer.size(0), b * np_, -1)              # (sk, b * np, hn)
        attention_probs = attention_probs.view(b * np_, sq, -1)                       # (b * np, sq, sk)
        context_layer = torch.bmm(attention_probs, value_layer.transpose(0, 1))       # (b * np, sq, hn)
        context_layer = context_layer.view(b, np_, sq, hn).permute(2, 0, 1, 3).contiguous()  # (sq, b, np, hn)
        return self.dense(context_layer.view(sq, b, hp))                              # (sq, b, hp)


class ChatGLMSketch(nn.Module):
    def __init__(self, hidden_size, num_heads, layer_id=2, bug=""):
        super().__init__()
        self.bug = bug
        self.input_layernorm = nn.LayerNorm(hidden_size)
        self.attention = SelfAttention(hidden_size, num_heads, layer_id, bug)

    def forward(self, inputs_embeds, context_lengths):
        batch_size, seq_length, _ = inputs_embeds.shape
        attention_mask = torch.ones((batch_size, seq_length, seq_length)).tril()
        position_ids = torch.arange(seq_length).unsqueeze(0).repeat(batch_size, 1)
        block_position_ids = torch.zeros(batch_size, seq_length, dtype=torch.long)
        for i, context_length in enumerate(context_lengths.tolist()):
            if self.bug == "context-rows-open":
                attention_mask[i, :context_length, :] = 1
            else:
                attention_mask[i, :, :context_length] = 1
            position_ids[i, context_length:] = context_length - 1                      # the [gMASK] slot
            block_position_ids[i, context_length:] = torch.arange(seq_length - context_length) + 1
        attention_mask = (attention_mask.unsqueeze(1) < 0.5).bool()                     # (b, 1, sq, sk)
        position_ids = torch.stack((position_ids, block_position_ids), dim=1)           # (b, 2, sq)
        hidden_states = inputs_embeds.transpose(0, 1)                                   # (sq, b, hp)
        attention_output = self.attention(self.input_layernorm(hidden_states), position_ids, attention_mask)
        return (hidden_states + attention_output).transpose(0, 1)                       # (b, sq, hp)


BUGS = ("qkv-split-flat", "block-positions-ignored", "context-rows-open")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=6, D=32, H=4):
    """A prompt of ``T - 2`` tokens (``[gMASK]`` last) then two generated tokens; the other rows' prompts one
    shorter."""
    torch.manual_seed(0)
    context_lengths = torch.tensor([T - 2] + [T - 3] * (B - 1))
    return ChatGLMSketch(D, H, bug=bug).eval(), (torch.randn(B, T, D), context_lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

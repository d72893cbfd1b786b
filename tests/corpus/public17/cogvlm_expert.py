"""THUDM/CogVLM (the Hugging Face port THUDM/cogvlm-chat-hf, modeling_cogvlm.py: ``get_expert_mask``,
``VisionExpertAttention``, ``attention_fn``), 2023-12: each token's q, k, v come from one of two experts, picked
by a vision-token mask: ``vision_token_mask[:, :-1] = (token_type_ids[:, :-1] == VISION_TOKEN_TYPE) &
(token_type_ids[:, 1:] == VISION_TOKEN_TYPE)`` (the last image token counts as language),
``mixed_raw_layer = torch.empty(shape)``, ``mixed_raw_layer[vision_token_mask] = vision_expert_query_key_value(
hidden_states[vision_token_mask])``, the same for the language tokens; ``torch.split(mixed_raw_layer,
hidden_size, dim=-1)``, ``_transpose_for_scores`` (``view(*size[:-1], H, d).permute(0, 2, 1, 3)``), rotary by
``position_ids`` (``rotate_half`` here, where CogVLM calls a fused kernel), ``attention_fn`` (``matmul(q /
sqrt(d), k.transpose(-1, -2))``, the causal mask added, ``softmax(dtype=float32)``, ``matmul(..., v)``),
``transpose(1, 2).contiguous().reshape(bsz, q_len, hidden_size)``, and the output dense picked per token again.

Bugs (argument): ``scores-reshape-without-permute``: ``_transpose_for_scores`` as ``tensor.reshape(bsz, H,
q_len, d)`` (the permute dropped; ``view`` refuses the split's strides, so the slip reaches for ``reshape``);
``experts-swapped``: the vision tokens written through the language expert and the language tokens through the
vision one (each expert's weights on the other tokens: no shape, no name shows it)."""

import sys

import torch
from torch import nn

LANGUAGE_TOKEN_TYPE, VISION_TOKEN_TYPE = 0, 1


def get_expert_mask(token_type_ids):
    vision_token_mask = torch.zeros_like(token_type_ids, dtype=torch.bool)
    vision_token_mask[:, :-1] = (token_type_ids[:, :-1] == VISION_TOKEN_TYPE) & (
        token_type_ids[:, 1:] == VISION_TOKEN_TYPE)
    return vision_token_mask, ~vision_token_mask


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class VisionExpertAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.hidden_size, self.num_heads, self.head_dim, self.bug = dim, heads, dim // heads, bug
        self.vision_expert_query_key_value = nn.Linear(dim, 3 * dim)
        self.vision_expert_dense = nn.Linear(dim, dim, bias=False)
        self.language_expert_query_key_value = nn.Linear(dim, 3 * dim, bias=False)
        self.language_expert_dense = nn.Linear(dim, dim, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq)

    def _transpose_for_scores(self, tensor):                                        # (B, T, D)
        if self.bug == "scores-reshape-without-permute":
            return tensor.reshape(tensor.shape[0], self.num_heads, tensor.shape[1], self.head_dim)
        tensor = tensor.view(*tensor.size()[:-1], self.num_heads, self.head_dim)
        return tensor.permute(0, 2, 1, 3)                                            # (B, H, T, d)

    def rotary(self, x, position_ids):                                             # (B, H, T, d), (B, T)
        freqs = position_ids[..., None].float() * self.inv_freq                      # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]                             # (B, 1, T, d)
        return x * emb.cos() + rotate_half(x) * emb.sin()

    def forward(self, hidden_states, token_type_ids, position_ids, attention_mask):
        bsz, q_len, _ = hidden_states.size()
        vision_token_mask, language_token_mask = get_expert_mask(token_type_ids)
        vision_qkv, language_qkv = self.vision_expert_query_key_value, self.language_expert_query_key_value
        vision_dense, language_dense = self.vision_expert_dense, self.language_expert_dense
        if self.bug == "experts-swapped":
            vision_qkv, language_qkv = language_qkv, vision_qkv
            vision_dense, language_dense = language_dense, vision_dense
        shape = list(hidden_states.shape)
        shape[-1] = shape[-1] * 3
        mixed_raw_layer = torch.empty(shape, dtype=hidden_states.dtype)
        mixed_raw_layer[vision_token_mask] = vision_qkv(hidden_states[vision_token_mask])
        mixed_raw_layer[language_token_mask] = language_qkv(hidden_states[language_token_mask])
        query_states, key_states, value_states = torch.split(mixed_raw_layer, self.hidden_size, dim=-1)
        query_states = self.rotary(self._transpose_for_scores(query_states), position_ids)
        key_states = self.rotary(self._transpose_for_scores(key_states), position_ids)
        value_states = self._transpose_for_scores(value_states)
        scores = torch.matmul(query_states / self.head_dim**0.5, key_states.transpose(-1, -2))
        scores = scores + attention_mask
        probs = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query_states.dtype)
        context_layer = torch.matmul(probs, value_states)                            # (B, H, T, d)
        context_layer = context_layer.transpose(1, 2).contiguous().reshape(bsz, q_len, self.hidden_size)
        attn_output = torch.empty(context_layer.shape, dtype=hidden_states.dtype)
        attn_output[vision_token_mask] = vision_dense(context_layer[vision_token_mask])
        attn_output[language_token_mask] = language_dense(context_layer[language_token_mask])
        return attn_output


class CogVLMDecoderLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(dim)
        self.self_attn = VisionExpertAttention(dim, heads, bug)

    def forward(self, hidden_states, token_type_ids, position_ids, attention_mask):
        return hidden_states + self.self_attn(self.input_layernorm(hidden_states), token_type_ids, position_ids,
                                              attention_mask)


class CogVLMModel(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.layers = nn.ModuleList([CogVLMDecoderLayer(dim, heads, bug) for _ in range(2)])

    def forward(self, inputs_embeds, token_type_ids):                              # (B, T, D), (B, T)
        B, T, _ = inputs_embeds.shape
        position_ids = torch.arange(T).unsqueeze(0).expand(B, -1)
        mask = torch.full((T, T), torch.finfo(inputs_embeds.dtype).min).triu(1)[None, None]
        h = inputs_embeds
        for layer in self.layers:
            h = layer(h, token_type_ids, position_ids, mask)
        return h


BUGS = ("scores-reshape-without-permute", "experts-swapped")
TWINS = ()
DIMS = ("B=2 T=7 D=32 H=4",)


def build(bug="", B=2, T=7, D=32, H=4):
    torch.manual_seed(0)
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    token_type_ids[:, 1:4] = VISION_TOKEN_TYPE                                      # bos, 3 image tokens, text
    return CogVLMModel(D, H, bug).eval(), (torch.randn(B, T, D), token_type_ids)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers, src/transformers/models/olmo2/modeling_olmo2.py (``Olmo2RMSNorm``, ``Olmo2Attention``,
``eager_attention_forward``, ``apply_rotary_pos_emb``, ``repeat_kv``; v4.48-4.52) with the 4-D mask of
``_prepare_4d_causal_attention_mask_with_cache_position``: OLMo 2's qk-norm is one RMSNorm over the whole projected
width, before the heads are split (``self.q_norm = Olmo2RMSNorm(num_attention_heads * head_dim)``, ``self.k_norm =
Olmo2RMSNorm(num_key_value_heads * head_dim)``, ``query_states = self.q_norm(self.q_proj(hidden_states))``), unlike
Qwen3's per-head norm; ``Olmo2RMSNorm`` takes ``hidden_states.pow(2).mean(-1, keepdim=True)`` in float32 and
returns ``(self.weight * hidden_states).to(input_dtype)``; then ``view(hidden_shape).transpose(1, 2)``, RoPE
(``rotate_half`` by halves, the table ``cat((freqs, freqs), -1)`` from ``position_ids``), ``repeat_kv``, ``scores *
scaling + causal_mask``, softmax in float32, ``transpose(1, 2)``, ``reshape(*input_shape, -1)``, ``o_proj``. GQA as in
OLMo 2 32B; entry 1 left-padded, ``position_ids`` as ``generate`` makes them.

Bugs: ``rmsnorm-mean-over-tokens``: the RMSNorm's mean taken ``mean(1, keepdim=True)`` (written for a 2-D
``(tokens, features)`` input and given ``(B, T, H * d)``: each feature is normalised by its mean square over the
sequence, so every query and key depends on every token of its row, later ones included);
``padding-mask-without-causal``: the 4-D mask made by the encoder helper ``_prepare_4d_attention_mask``
(``(1 - attention_mask[:, None, None, :]) * min`` expanded to ``(B, 1, T, T)``), the padding without the causal
triangle (the encoder/decoder helper confusion: ``is_causal`` is then not applied because a mask was given)."""

import sys

import torch
from torch import nn


class Olmo2RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6, bug=""):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon, self.bug = eps, bug

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        if self.bug == "rmsnorm-mean-over-tokens":
            variance = hidden_states.pow(2).mean(1, keepdim=True)                    # (B, 1, C)
        else:
            variance = hidden_states.pow(2).mean(-1, keepdim=True)                   # (B, T, 1)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return (self.weight * hidden_states).to(input_dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)                                               # (B, 1, T, d)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)   # (B, H, T, d)


class Olmo2Attention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads, bug=""):
        super().__init__()
        self.head_dim = hidden_size // num_attention_heads
        self.num_key_value_groups = num_attention_heads // num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.is_causal = True
        self.q_proj = nn.Linear(hidden_size, num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_attention_heads * self.head_dim, hidden_size, bias=False)
        self.q_norm = Olmo2RMSNorm(num_attention_heads * self.head_dim, bug=bug)
        self.k_norm = Olmo2RMSNorm(num_key_value_heads * self.head_dim, bug=bug)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_norm(self.q_proj(hidden_states))                      # (B, T, H * d)
        key_states = self.k_norm(self.k_proj(hidden_states))                        # (B, T, H_kv * d)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(hidden_shape).transpose(1, 2)              # (B, H, T, d)
        key_states = key_states.view(hidden_shape).transpose(1, 2)                  # (B, H_kv, T, d)
        value_states = value_states.view(hidden_shape).transpose(1, 2)              # (B, H_kv, T, d)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

        key_states = repeat_kv(key_states, self.num_key_value_groups)               # (B, H, T, d)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling   # (B, H, T, T)
        attn_weights = attn_weights + attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)                       # (B, H, T, d)
        attn_output = attn_output.transpose(1, 2).contiguous()                       # (B, T, H, d)
        return self.o_proj(attn_output.reshape(*input_shape, -1).contiguous())       # (B, T, D)


class Olmo2LayerAttention(nn.Module):
    """What ``Olmo2Model.forward`` does around one attention: positions, rotary tables, the 4-D mask."""

    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads, bug=""):
        super().__init__()
        head_dim = hidden_size // num_attention_heads
        self.register_buffer("inv_freq", 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim)))
        self.self_attn = Olmo2Attention(hidden_size, num_attention_heads, num_key_value_heads, bug)
        self.bug = bug

    def forward(self, inputs_embeds, attention_mask):
        batch_size, sequence_length = attention_mask.shape
        position_ids = attention_mask.long().cumsum(-1) - 1                          # (B, T)
        position_ids.masked_fill_(attention_mask == 0, 1)
        inv_freq_expanded = self.inv_freq[None, :, None].expand(batch_size, -1, 1)   # (B, d/2, 1)
        freqs = (inv_freq_expanded @ position_ids[:, None, :].float()).transpose(1, 2)   # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                      # (B, T, d)
        min_dtype = torch.finfo(inputs_embeds.dtype).min
        if self.bug == "padding-mask-without-causal":
            expanded_mask = attention_mask[:, None, None, :].expand(batch_size, 1, sequence_length, sequence_length)
            causal_mask = (1.0 - expanded_mask.to(inputs_embeds.dtype)) * min_dtype  # (B, 1, T, T)
        else:
            causal_mask = torch.full((sequence_length, sequence_length), min_dtype).triu(1)   # (T, T)
            causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1).clone()   # (B, 1, T, T)
            padding_mask = causal_mask + attention_mask[:, None, None, :].to(inputs_embeds.dtype)
            causal_mask = causal_mask.masked_fill(padding_mask == 0, min_dtype)
        return self.self_attn(inputs_embeds, (emb.cos(), emb.sin()), causal_mask)


BUGS = ("rmsnorm-mean-over-tokens", "padding-mask-without-causal")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 H_kv=2"}


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1:, :2] = 0                                                       # the later prompts left-padded
    return Olmo2LayerAttention(D, H, H_kv, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

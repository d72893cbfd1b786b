"""huggingface/transformers pull request #41890 ("[T5Gemma] Fix cross attention cache", fixes issue #41875):
the encoder-decoder's cross-attention cache was built with the decoder's layer types, so on a decoder layer
of type ``sliding_attention`` the cross-attention's keys and values (the projected *encoder* states) went
into a sliding-window cache layer that keeps only the last ``sliding_window`` of them, and the eager / sdpa
path cut the encoder mask to match ("sdpa just wrongly cuts parts of the mask"). T5Gemma's cross-attention
is full attention over the encoder in every layer: the decoder tokens lost the first ``S - window`` source
tokens.

The idiom (T5Gemma's decoder layer): ``q_proj``/``k_proj``/``v_proj``/``o_proj`` without bias, grouped
key/value heads repeated by ``repeat_kv``, ``scaling = query_pre_attn_scalar ** -0.5``, the logit soft-cap
``tanh(scores / cap) * cap``, an additive float mask, ``softmax`` in float32, RMSNorms before and after each
sub-layer (``1 + weight``); the decoder's self-attention is causal within the sliding window; the encoder
states and the encoder padding mask (the second source ends in padding) come in as inputs.

Bug (cache): ``cross-cache-sliding``: the cross keys, values and mask keep only the last ``WINDOW`` source
tokens."""

import sys

import torch
from torch import nn

BUGS = ("cross-cache-sliding",)
TWINS = ()
DIMS = ("B=2 T=4 S=8 D=32 H=4",)
WINDOW, CAP = 4, 50.0


class T5GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        out = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.float())).type_as(x)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def eager_attention_forward(module, query, key, value, attention_mask):
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * module.scaling
    attn_weights = torch.tanh(attn_weights / CAP) * CAP
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask[:, :, :, : key_states.shape[-2]]
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output.transpose(1, 2).contiguous()


class T5GemmaAttention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, head_dim):
        super().__init__()
        self.head_dim = head_dim
        self.num_key_value_groups = heads // kv_heads
        self.scaling = head_dim ** -0.5                     # query_pre_attn_scalar = head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)

    def forward(self, hidden_states, kv_states, attention_mask, cache_window=None):
        input_shape = hidden_states.shape[:-1]
        q_shape = (*input_shape, -1, self.head_dim)
        kv_shape = (*kv_states.shape[:-1], -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(q_shape).transpose(1, 2)
        key_states = self.k_proj(kv_states).view(kv_shape).transpose(1, 2)
        value_states = self.v_proj(kv_states).view(kv_shape).transpose(1, 2)
        if cache_window is not None:                         # a sliding-window cache layer keeps the last ones
            key_states = key_states[:, :, -cache_window:]
            value_states = value_states[:, :, -cache_window:]
            attention_mask = attention_mask[..., -cache_window:]
        attn_output = eager_attention_forward(self, query_states, key_states, value_states, attention_mask)
        return self.o_proj(attn_output.reshape(*input_shape, -1))


class T5GemmaDecoderLayer(nn.Module):
    def __init__(self, hidden, heads, bug=""):
        super().__init__()
        self.bug = bug
        head_dim, kv_heads = hidden // heads, heads // 2
        self.self_attn = T5GemmaAttention(hidden, heads, kv_heads, head_dim)
        self.cross_attn = T5GemmaAttention(hidden, heads, kv_heads, head_dim)
        self.pre_self_attn_layernorm = T5GemmaRMSNorm(hidden)
        self.post_self_attn_layernorm = T5GemmaRMSNorm(hidden)
        self.pre_cross_attn_layernorm = T5GemmaRMSNorm(hidden)
        self.post_cross_attn_layernorm = T5GemmaRMSNorm(hidden)

    def forward(self, hidden_states, encoder_hidden_states, encoder_attention_mask):
        t = hidden_states.shape[1]
        i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
        allowed = (j <= i) & (i - j < WINDOW)                # causal, within the sliding window
        self_mask = torch.where(allowed, 0.0, torch.finfo(hidden_states.dtype).min)[None, None]
        cross_mask = torch.where(encoder_attention_mask[:, None, None, :].bool(), 0.0,
                                 torch.finfo(hidden_states.dtype).min)
        residual = hidden_states
        hidden_states = self.self_attn(self.pre_self_attn_layernorm(hidden_states),
                                       self.pre_self_attn_layernorm(hidden_states), self_mask)
        hidden_states = residual + self.post_self_attn_layernorm(hidden_states)
        residual = hidden_states
        window = WINDOW if self.bug == "cross-cache-sliding" else None
        hidden_states = self.cross_attn(self.pre_cross_attn_layernorm(hidden_states), encoder_hidden_states,
                                        cross_mask, cache_window=window)
        return residual + self.post_cross_attn_layernorm(hidden_states)


def build(bug="", B=2, T=4, S=8, D=32, H=4):
    torch.manual_seed(0)
    encoder_hidden_states = torch.randn(B, S, D)
    encoder_attention_mask = torch.ones(B, S, dtype=torch.long)
    encoder_attention_mask[1:, S - 2:] = 0                   # the second source ends in padding
    return T5GemmaDecoderLayer(D, H, bug=bug).eval(), (torch.randn(B, T, D), encoder_hidden_states,
                                                        encoder_attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers pull request #47946 ("[GPT2] Fix encoder_attention_mask being silently discarded in
cross-attention"): after the masking refactor, ``GPT2Model.forward`` set ``encoder_attention_mask = None``
before ``create_bidirectional_mask``, so a GPT-2 decoder with ``add_cross_attention`` attended the encoder's
padding tokens in every cross-attention layer (``attention_mask=None``); the same line was copied into
DecisionTransformer. The fix removes the line, so the encoder's padding mask reaches the cross-attention.

The idiom (GPT-2): ``Conv1D`` projections (``c_attn`` for the self-attention's fused ``q, k, v``; ``q_attn`` on
the decoder states and ``c_attn`` of width 2D on the encoder states for the cross-attention, ``split(D,
dim=2)``), ``view(B, L, H, d).transpose(1, 2)``, ``eager_attention_forward`` (``matmul`` of the query and the
transposed key, ``/ sqrt(d)``, the additive mask, ``softmax(-1)``, ``matmul`` with the values), merge,
``c_proj``; a causal mask on the self-attention, the encoder's second sequence padded by two (S = 5 encoder
tokens).

Bug (argument): ``encoder-mask-dropped``: the encoder's padding mask replaced by ``None``."""

import sys

import torch
from torch import nn

BUGS = ("encoder-mask-dropped",)
TWINS = ()
DIMS = ("B=2 T=6 S=5 D=32 H=4",)


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.randn(nx, nf) * 0.02), nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.weight.size(-1),)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def eager_attention_forward(query, key, value, attention_mask):
    attn_weights = torch.matmul(query, key.transpose(-1, -2)) / torch.full([], value.size(-1) ** 0.5)
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1)
    return torch.matmul(attn_weights, value)


class GPT2Attention(nn.Module):
    def __init__(self, embed_dim, num_heads, is_cross_attention=False):
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.is_cross_attention = is_cross_attention
        if is_cross_attention:
            self.c_attn, self.q_attn = Conv1D(2 * embed_dim, embed_dim), Conv1D(embed_dim, embed_dim)
        else:
            self.c_attn = Conv1D(3 * embed_dim, embed_dim)
        self.c_proj = Conv1D(embed_dim, embed_dim)

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None):
        if self.is_cross_attention:
            query_states = self.q_attn(hidden_states)
            key_states, value_states = self.c_attn(encoder_hidden_states).split(self.embed_dim, dim=2)
        else:
            query_states, key_states, value_states = self.c_attn(hidden_states).split(self.embed_dim, dim=2)
        shape_q = (*query_states.shape[:-1], -1, self.head_dim)
        shape_kv = (*key_states.shape[:-1], -1, self.head_dim)
        query_states = query_states.view(shape_q).transpose(1, 2)
        key_states = key_states.view(shape_kv).transpose(1, 2)
        value_states = value_states.view(shape_kv).transpose(1, 2)
        attn_output = eager_attention_forward(query_states, key_states, value_states, attention_mask)
        attn_output = attn_output.transpose(1, 2).reshape(*hidden_states.shape[:-1], -1).contiguous()
        return self.c_proj(attn_output)


class GPT2Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln_1, self.ln_cross_attn = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn, self.crossattention = GPT2Attention(dim, heads), GPT2Attention(dim, heads, True)

    def forward(self, hidden_states, causal_mask, encoder_hidden_states, encoder_attention_mask):
        hidden_states = self.attn(self.ln_1(hidden_states), causal_mask) + hidden_states
        cross = self.crossattention(self.ln_cross_attn(hidden_states), encoder_attention_mask, encoder_hidden_states)
        return cross + hidden_states


class GPT2Model(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.h, self.bug = GPT2Block(dim, heads), bug

    def forward(self, inputs_embeds, encoder_hidden_states, encoder_attention_mask):   # (B,T,D), (B,S,D), (B,S)
        min_value = torch.finfo(inputs_embeds.dtype).min
        length = inputs_embeds.shape[1]
        causal_mask = torch.full((length, length), min_value).triu(1)[None, None]
        if self.bug == "encoder-mask-dropped":
            encoder_attention_mask = None                                              # [mask]
        if encoder_attention_mask is not None:
            encoder_attention_mask = (1.0 - encoder_attention_mask[:, None, None, :].float()) * min_value
        return self.h(inputs_embeds, causal_mask, encoder_hidden_states, encoder_attention_mask)


def build(bug="", B=2, T=6, S=5, D=32, H=4):
    torch.manual_seed(0)
    encoder_attention_mask = torch.ones(B, S, dtype=torch.long)
    encoder_attention_mask[1, -2:] = 0                                     # the second source padded by two
    model = GPT2Model(D, H, bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, S, D), encoder_attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

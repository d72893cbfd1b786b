"""huggingface/transformers issue #46077 ("Gemma4 ``use_bidirectional_attention="all"`` still builds causal
attention masks", labelled bug), fixed by PR #46079 (merged): the config made each attention module
non-causal but left ``config.is_causal`` unset, and the shared mask helpers (``create_causal_mask``, the
sliding-window one) read ``config.is_causal``: the model meant as an encoder still got causal masks.

The idiom (transformers' Gemma-style attention with a mask built outside it): ``q_proj``/``k_proj``/
``v_proj``/``o_proj``, ``view(B, T, -1, head_dim).transpose(1, 2)``, an additive 4-D mask ``(B, 1, T, T)``
from ``create_causal_mask`` or ``create_bidirectional_mask`` (padding folded in), ``matmul`` of queries and
keys scaled by ``head_dim ** -0.5``, the mask added, ``softmax`` in float32, ``matmul`` with the values.

Twin (argument): ``causal-for-encoder``: the causal mask where bidirectional attention was configured. Which
one the model meant is its configuration's, not anything torch records: a causal mask on a decoder is right,
so the trace cannot tell the two apart."""

import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("causal-for-encoder",)
DIMS = ("B=2 T=6 D=32 H=4",)


def create_causal_mask(attention_mask, dtype):
    b, t = attention_mask.shape
    allowed = torch.ones(t, t, dtype=torch.bool).tril()[None] & attention_mask[:, None, :].bool()
    return torch.zeros(b, 1, t, t, dtype=dtype).masked_fill(~allowed[:, None], torch.finfo(dtype).min)


def create_bidirectional_mask(attention_mask, dtype):
    b, t = attention_mask.shape
    allowed = attention_mask[:, None, None, :].bool().expand(b, 1, t, t)
    return torch.zeros(b, 1, t, t, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)


class Gemma4Attention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.head_dim = hidden_size // num_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
            nn.Linear(hidden_size, hidden_size, bias=False) for _ in range(4))

    def forward(self, hidden_states, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        attn_weights = attn_weights + attention_mask                                  # [mask]
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(attn_weights, v).transpose(1, 2).reshape(*input_shape, -1)
        return self.o_proj(out)


class Gemma4TextModel(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.is_causal = bug == "causal-for-encoder"          # use_bidirectional_attention="all" not applied
        self.self_attn = Gemma4Attention(hidden_size, num_heads)

    def forward(self, inputs_embeds, attention_mask):
        build_mask = create_causal_mask if self.is_causal else create_bidirectional_mask
        mask = build_mask(attention_mask, inputs_embeds.dtype)
        return self.self_attn(inputs_embeds, mask)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[-1, -2:] = 0
    return Gemma4TextModel(D, H, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

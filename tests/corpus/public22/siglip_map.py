"""huggingface/transformers, ``src/transformers/models/siglip/modeling_siglip.py`` (v4.40, ``SiglipAttention``,
``SiglipMultiheadAttentionPoolingHead``): the vision tower's attention (``q_proj``/``k_proj``/``v_proj``,
``view(B, T, H, d).transpose(1, 2)``, ``matmul(q, k.transpose(2, 3)) * scale``, ``softmax(dim=-1,
dtype=float32)``, ``transpose(1, 2).contiguous()``, ``reshape(B, T, D)``, ``out_proj``), then the MAP head: a
learnt probe ``(1, 1, D)`` ``repeat``-ed over the batch as the one query of an ``nn.MultiheadAttention(D, H,
batch_first=True)`` over the patch tokens, a residual ``MLP`` after ``layernorm``, ``hidden_state[:, 0]``.

Bugs: ``merge-without-transpose``: the tower's output reshaped ``(B, T, D)`` straight from ``(B, H, T, d)``
(the transpose before ``reshape`` forgotten); ``softmax-over-queries``: the tower's ``softmax(dim=-2)`` (the slip
of softmax's dim)."""

import sys

import torch
from torch import nn


class SiglipAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, hidden_states):
        batch_size, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(batch_size, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(batch_size, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(batch_size, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scale   # (B, H, T, T)
        dim = -2 if self.bug == "softmax-over-queries" else -1
        attn_weights = nn.functional.softmax(attn_weights, dim=dim, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)                              # (B, H, T, d)
        if self.bug != "merge-without-transpose":
            attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(batch_size, q_len, self.embed_dim)
        return self.out_proj(attn_output)


class SiglipMLP(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.fc1 = nn.Linear(hidden_size, intermediate_size)
        self.fc2 = nn.Linear(intermediate_size, hidden_size)

    def forward(self, hidden_states):
        return self.fc2(nn.functional.gelu(self.fc1(hidden_states), approximate="tanh"))


class SiglipMultiheadAttentionPoolingHead(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.probe = nn.Parameter(torch.randn(1, 1, hidden_size))
        self.attention = nn.MultiheadAttention(hidden_size, num_heads, batch_first=True)
        self.layernorm = nn.LayerNorm(hidden_size)
        self.mlp = SiglipMLP(hidden_size, 2 * hidden_size)

    def forward(self, hidden_state):
        batch_size = hidden_state.shape[0]
        probe = self.probe.repeat(batch_size, 1, 1)                                         # (B, 1, D)
        hidden_state = self.attention(probe, hidden_state, hidden_state)[0]
        residual = hidden_state
        hidden_state = self.layernorm(hidden_state)
        hidden_state = residual + self.mlp(hidden_state)
        return hidden_state[:, 0]                                                           # (B, D)


class SiglipVisionTail(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(hidden_size)
        self.self_attn = SiglipAttention(hidden_size, num_heads, bug)
        self.post_layernorm = nn.LayerNorm(hidden_size)
        self.head = SiglipMultiheadAttentionPoolingHead(hidden_size, num_heads)

    def forward(self, hidden_states):
        hidden_states = hidden_states + self.self_attn(self.layer_norm1(hidden_states))
        return self.head(self.post_layernorm(hidden_states))


BUGS = ("merge-without-transpose", "softmax-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return SiglipVisionTail(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers, src/transformers/models/chameleon/modeling_chameleon.py (v4.44,
``ChameleonLayerNorm``, ``ChameleonAttention``, ``ChameleonRotaryEmbedding``): ``q_norm =
ChameleonLayerNorm((num_heads, head_dim))``, a LayerNorm whose ``normalized_shape`` is cut to ``(head_dim,)``
(``F.layer_norm(x, self.normalized_shape, None, None, eps)``) and whose weight and bias keep ``(H, head_dim)``:
each head normalised over its own width, then scaled per head; applied after ``query_states.reshape(-1,
num_heads, head_dim)`` on the ``(B*T, H, d)`` rows, then ``reshape(bsz, q_len, H, d).transpose(1, 2)``; k the same
with its key/value heads; rotary (``rotate_half``), ``repeat_kv``, ``matmul(q, k.transpose(2, 3)) / sqrt(d)``, the
causal mask, ``softmax(dtype=float32)``, ``o_proj``.

Bugs (argument): ``norm-over-heads-and-width``: ``F.layer_norm`` over the full ``(num_heads, head_dim)`` (the
plain ``nn.LayerNorm`` a port keeps when it drops the class's ``normalized_shape = (hidden_size[-1],)`` override:
every head normalised by statistics of all heads); ``view-heads-first``: ``query_states.reshape(bsz, H, q_len,
d)`` where ``reshape(bsz, q_len, H, d).transpose(1, 2)`` is meant."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class ChameleonLayerNorm(nn.LayerNorm):
    def __init__(self, hidden_size, *args, bug="", **kwargs):
        super().__init__(hidden_size, *args, **kwargs)
        if bug != "norm-over-heads-and-width":
            self.normalized_shape = (hidden_size[-1],)
        with torch.no_grad():
            self.weight.normal_(1.0, 0.1)
            self.bias.normal_(0.0, 0.1)

    def forward(self, hidden_states):
        hidden_states = F.layer_norm(hidden_states, self.normalized_shape, None, None, eps=1e-5)
        return hidden_states * self.weight + self.bias


class ChameleonAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.head_dim, self.bug = heads, kv_heads, dim // heads, bug
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.q_norm = ChameleonLayerNorm((heads, self.head_dim), bug=bug)
        self.k_norm = ChameleonLayerNorm((kv_heads, self.head_dim), bug=bug)

    def forward(self, hidden_states, cos, sin, attention_mask):                   # (B, T, D)
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        query_states = self.q_norm(query_states.reshape(-1, self.num_heads, self.head_dim))        # (B*T, H, d)
        key_states = self.k_norm(key_states.reshape(-1, self.num_key_value_heads, self.head_dim))
        if self.bug == "view-heads-first":
            query_states = query_states.reshape(bsz, self.num_heads, q_len, self.head_dim)
        else:
            query_states = query_states.reshape(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.reshape(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        query_states = query_states * cos + rotate_half(query_states) * sin
        key_states = key_states * cos + rotate_half(key_states) * sin
        n_rep = self.num_heads // self.num_key_value_heads
        key_states, value_states = repeat_kv(key_states, n_rep), repeat_kv(value_states, n_rep)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / self.head_dim**0.5
        attn_weights = attn_weights + attention_mask
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)                       # (B, H, T, d)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


class ChameleonModel(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.head_dim = dim // heads
        self.layers = nn.ModuleList([ChameleonAttention(dim, heads, kv_heads, bug) for _ in range(2)])
        self.norms = nn.ModuleList([nn.LayerNorm(dim) for _ in range(2)])
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, inputs_embeds):                                              # (B, T, D)
        B, T, _ = inputs_embeds.shape
        position_ids = torch.arange(T).unsqueeze(0).expand(B, -1)
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)                   # (B, 1, T, d)
        mask = torch.full((T, T), torch.finfo(inputs_embeds.dtype).min).triu(1)[None, None]
        h = inputs_embeds
        for norm, layer in zip(self.norms, self.layers):
            h = h + layer(norm(h), cos, sin, mask)
        return h


BUGS = ("norm-over-heads-and-width", "view-heads-first")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return ChameleonModel(D, H, H_kv, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

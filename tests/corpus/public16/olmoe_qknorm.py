"""huggingface/transformers, src/transformers/models/olmoe/modeling_olmoe.py (v4.45, ``OlmoeAttention``,
``OlmoeRMSNorm``): ``q_norm = OlmoeRMSNorm(hidden_size)`` and ``k_norm = OlmoeRMSNorm((hidden_size //
num_heads) * num_key_value_heads)``: q and k normalised over the whole projected width *before* the head split
(``query_states = self.q_norm(self.q_proj(hidden_states))``), then ``clip_qkv``, ``view(bsz, q_len, num_heads,
head_dim).transpose(1, 2)``, rotary, ``repeat_kv``, ``q @ k^T / sqrt(head_dim)``, the causal mask, softmax in
float32, ``o_proj``. (The mixture-of-experts MLP is left out: the attention is what is traced.)

Bugs (argument): ``view-heads-first``: q, k and v viewed ``(bsz, num_heads, q_len, head_dim)`` with no transpose
(the slip of FuxiCTR issue #30, here in a fresh code base); ``norm-over-tokens``: the RMSNorm's variance taken
``mean(1, keepdim=True)`` (a hand-written norm that reduces the second axis of ``(B, T, D)``: every token's q and k
scaled by statistics of the whole sequence, the future included)."""

import sys

import torch
from torch import nn


class OlmoeRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-5, reduce_dim=-1):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))
        self.eps, self.reduce_dim = eps, reduce_dim

    def forward(self, hidden_states):
        variance = hidden_states.float().pow(2).mean(self.reduce_dim, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class OlmoeAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug="", clip_qkv=8.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.bug, self.clip_qkv = heads, kv_heads, dim // heads, bug, clip_qkv
        reduce_dim = 1 if bug == "norm-over-tokens" else -1
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.q_norm = OlmoeRMSNorm(heads * self.head_dim, reduce_dim=reduce_dim)
        self.k_norm = OlmoeRMSNorm(kv_heads * self.head_dim, reduce_dim=reduce_dim)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def heads_of(self, x, n):                                                      # (B, T, n * d)
        B, T, _ = x.shape
        if self.bug == "view-heads-first":
            return x.view(B, n, T, self.head_dim)
        return x.view(B, T, n, self.head_dim).transpose(1, 2)                      # (B, n, T, d)

    def forward(self, hidden_states, position_ids, attention_mask):
        query_states = self.q_norm(self.q_proj(hidden_states))                      # (B, T, D)
        key_states = self.k_norm(self.k_proj(hidden_states))                        # (B, T, H_kv * d)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.clamp(min=-self.clip_qkv, max=self.clip_qkv)
        key_states = key_states.clamp(min=-self.clip_qkv, max=self.clip_qkv)
        value_states = value_states.clamp(min=-self.clip_qkv, max=self.clip_qkv)
        q = self.heads_of(query_states, self.heads)                                # (B, H, T, d)
        k = self.heads_of(key_states, self.kv_heads)                               # (B, H_kv, T, d)
        v = self.heads_of(value_states, self.kv_heads)
        freqs = position_ids[:, :, None].float() * self.inv_freq                   # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)                  # (B, 1, T, d)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, self.heads // self.kv_heads)
        v = repeat_kv(v, self.heads // self.kv_heads)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / self.head_dim**0.5     # (B, H, T, T)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()   # (B, T, H, d)
        B, T = attn_output.shape[:2]
        return self.o_proj(attn_output.reshape(B, T, -1))


def causal_mask(B, T):
    hidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return torch.zeros(T, T).masked_fill(hidden, torch.finfo(torch.float32).min)[None, None].expand(B, 1, T, T)


BUGS = ("view-heads-first", "norm-over-tokens")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    positions = torch.arange(T).unsqueeze(0).expand(B, T)
    return OlmoeAttention(D, H, H_kv, bug).eval(), (torch.randn(B, T, D), positions, causal_mask(B, T))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers, src/transformers/models/starcoder2/modeling_starcoder2.py (v4.40,
``Starcoder2Attention``, ``Starcoder2Model``): ``q_proj``/``k_proj``/``v_proj``/``o_proj`` with biases
(``use_bias=True``), grouped key/value heads, each viewed ``(B, T, -1, head_dim)`` and ``transpose(1, 2)``;
rotary (``rotate_half``) on q and k; ``repeat_kv``; ``attn_weights = q @ k^T / sqrt(head_dim)``; the causal mask
with the sliding window on top (``_prepare_4d_causal_attention_mask(..., sliding_window=config.sliding_window)``: a
key is hidden where ``q_idx - kv_idx >= sliding_window``), ``softmax(..., dtype=float32)``, ``o_proj``.

Bugs (argument): ``out-not-transposed``: the attention output reshaped ``(B, T, D)`` straight from ``(B, H, T,
d)`` (``attn_output.transpose(1, 2)`` dropped). ``window-off-by-one`` (a known miss up to b2f62da, ``CAUGHT``):
the window test written ``q_idx - kv_idx > sliding_window`` (each query sees ``sliding_window + 1`` keys, the
natural off-by-one between a "sees w keys" and a "sees w back" reading of the window, as flash-attn's
``window_size=(w, 0)`` and an eager ``>= w`` mask differ by one): the mask is a valid causal band of another
width; no window the model holds is that width, so its ``✓`` became ``?`` (``window-width-unchecked``)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class Starcoder2RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, position_ids):                                              # (B, T)
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]      # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                    # (B, T, d)
        return emb.cos(), emb.sin()


class Starcoder2Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.bug = heads, kv_heads, dim // heads, bug
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=True)

    def forward(self, hidden_states, cos, sin, attention_mask):
        B, T, _ = hidden_states.shape
        hidden_shape = (B, T, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H, T, d)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H_kv, T, d)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H_kv, T, d)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)                              # (B, 1, T, d)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, self.heads // self.kv_heads)                              # (B, H, T, d)
        v = repeat_kv(v, self.heads // self.kv_heads)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / self.head_dim**0.5     # (B, H, T, T)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v)                                # (B, H, T, d)
        if self.bug != "out-not-transposed":
            attn_output = attn_output.transpose(1, 2).contiguous()                 # (B, T, H, d)
        attn_output = attn_output.reshape(B, T, -1)                                # (B, T, D)
        return self.o_proj(attn_output)


class Starcoder2Model(nn.Module):
    def __init__(self, dim, heads, kv_heads, sliding_window=3, bug=""):
        super().__init__()
        self.sliding_window, self.bug = sliding_window, bug
        self.rotary_emb = Starcoder2RotaryEmbedding(dim // heads)
        self.norm = nn.LayerNorm(dim)
        self.self_attn = Starcoder2Attention(dim, heads, kv_heads, bug)

    def sliding_causal_mask(self, T, dtype):
        q_idx, kv_idx = torch.arange(T)[:, None], torch.arange(T)[None, :]
        past = q_idx - kv_idx
        too_far = past > self.sliding_window if self.bug == "window-off-by-one" else past >= self.sliding_window
        hidden = (kv_idx > q_idx) | too_far                                        # (T, T)
        return torch.zeros(T, T, dtype=dtype).masked_fill(hidden, torch.finfo(dtype).min)[None, None]

    def forward(self, hidden_states):                                              # (B, T, D)
        B, T, _ = hidden_states.shape
        position_ids = torch.arange(T).unsqueeze(0).expand(B, T)
        cos, sin = self.rotary_emb(position_ids)
        mask = self.sliding_causal_mask(T, hidden_states.dtype)
        return hidden_states + self.self_attn(self.norm(hidden_states), cos, sin, mask)


BUGS = ("out-not-transposed",)
TWINS = ()
CAUGHT = ("window-off-by-one",)   # (a known miss, ✓, up to b2f62da)
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    return Starcoder2Model(D, H, H_kv, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

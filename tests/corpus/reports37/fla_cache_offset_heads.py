"""fla-org/flash-linear-attention issue #126 ("[Bug] The offset when updating KV cache seems incorrect.",
labelled bug, closed): ``GatedLinearAttention.forward`` told the cache how many new tokens the step brought with
``past_key_value.update(..., offset=q.shape[2])``, but after ``rearrange(q, 'b t (h d) -> b t h d')`` the third
axis of ``q`` is the heads, so the cache's seen-token count grew by the number of heads rather than by the number
of tokens (the reporter: "``q.shape[2]`` is the number of heads rather than the number of tokens.
``offset=q.shape[1]`` seems reasonable"). Every reader of ``get_seq_length`` then got a wrong past length.

The idiom (ported to torch): fla's cache, which keeps a layer's states and a ``_seen_tokens`` count grown by the
``offset`` the layer passes, and a layer in fla's ``[B, T, H, d]`` layout. GLA keeps a recurrent state and no
rotary, so the port puts the same ``update(..., offset=...)`` call in fla's softmax ``Attention`` layer (same
cache), whose ``seqlen_offset = past_key_values.get_seq_length()`` positions the rotary embedding (``rotate_half``
on ``cat(freqs, freqs)``); keys and values concatenated along the tokens, SDPA (causal at the prefill). A prefill
of T tokens, then one decoding step: with the slip, the step's token is rotated at position H instead of T.

Bug (argument): ``offset-heads``: the cache's offset read from ``q.shape[2]`` (the heads) of ``[B, T, H, d]``."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

BUGS = ("offset-heads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Cache:
    def __init__(self):
        self.states, self._seen_tokens = [], 0

    def get_seq_length(self, layer_idx=0):
        return self._seen_tokens if layer_idx < len(self.states) else 0

    def update(self, attn_state, layer_idx, offset=1):
        k, v = attn_state
        if layer_idx == 0:
            self._seen_tokens += offset
        if layer_idx == len(self.states):
            self.states.append((k, v))
        else:
            past_k, past_v = self.states[layer_idx]
            self.states[layer_idx] = (torch.cat([past_k, k], dim=1), torch.cat([past_v, v], dim=1))   # (B, P+T, H, d)
        return self.states[layer_idx]


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, q, k, seqlen_offset=0):
        t = torch.arange(seqlen_offset, seqlen_offset + q.shape[1], dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)                                           # (T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)[None, :, None, :]                       # (1, T, 1, d)
        cos, sin = emb.cos(), emb.sin()
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, layer_idx=0, bug=""):
        super().__init__()
        self.bug, self.layer_idx = bug, layer_idx
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(hidden_size, hidden_size, bias=False)
                                                              for _ in range(4))
        self.rotary = RotaryEmbedding(self.head_dim)

    def forward(self, hidden_states, past_key_values):
        q = rearrange(self.q_proj(hidden_states), "b t (h d) -> b t h d", d=self.head_dim)   # (B, T, H, d)
        k = rearrange(self.k_proj(hidden_states), "b t (h d) -> b t h d", d=self.head_dim)   # (B, T, H, d)
        v = rearrange(self.v_proj(hidden_states), "b t (h d) -> b t h d", d=self.head_dim)   # (B, T, H, d)
        seqlen_offset = past_key_values.get_seq_length(self.layer_idx)
        q, k = self.rotary(q, k, seqlen_offset=seqlen_offset)
        offset = q.shape[2] if self.bug == "offset-heads" else q.shape[1]
        k, v = past_key_values.update((k, v), self.layer_idx, offset=offset)           # (B, P+T, H, d)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))                                # (B, H, *, d)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] > 1)           # (B, H, T, d)
        return self.o_proj(rearrange(o.transpose(1, 2), "b t h d -> b t (h d)"))       # (B, T, D)


class Model(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.attn = Attention(hidden_size, num_heads, 0, bug)
        self.norm = nn.RMSNorm(hidden_size)

    def forward(self, prompt, token):
        cache = Cache()
        outs = []
        for x in (prompt, token):                      # the prefill, then one decoding step
            outs.append(x + self.attn(self.norm(x), cache))
        return torch.cat(outs, dim=1)                                                   # (B, T+1, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Model(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

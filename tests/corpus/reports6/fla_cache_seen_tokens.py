"""fla-org/flash-linear-attention issue #766 ("[Bug] Cache seen-token count is committed too early during decode,
shifting upper-layer RoPE offsets", labelled bug, closed by its fix): the shared cache incremented its global
``_seen_tokens`` when layer 0 wrote its new keys, before the other layers of the same forward ran, so
``past_key_values.get_seq_length(layer_idx)`` returned the past length *plus the new tokens* to every upper
layer; their attention layers read it as ``seqlen_offset`` for the rotary embedding, so on each decoding step
layers 1.. rotated the new token one position too far (and the whole prefill T positions too far, a shift RoPE
does not see). The fix commits the count once the forward is done (each layer reads its own cached length).

fla's idiom (``fla.layers.attn.Attention`` with its ``Cache``): ``q_proj``/``k_proj``/``v_proj``/``o_proj``,
``rearrange(q, '... (h d) -> ... h d')`` to ``[B, T, H, d]``, ``seqlen_offset =
past_key_values.get_seq_length(self.layer_idx)``, ``self.rotary(q, k, seqlen_offset=...)`` (``RotaryEmbedding``,
``rotate_half`` on ``cat(freqs, freqs)`` tables, here its torch reference), ``past_key_values.update(...)``
concatenating along the tokens, then attention (flash-attn's ``causal=True`` at the prefill, a plain read of the
cache at a step; here SDPA). Two layers, a prefill of T tokens, then one decoding step.

Bug (argument): ``seen-tokens-early``: the count committed when layer 0 writes."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

BUGS = ("seen-tokens-early",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Cache:
    def __init__(self, bug=""):
        self.bug, self.states, self._seen_tokens = bug, [], 0

    def get_seq_length(self, layer_idx=0):
        if self.bug == "seen-tokens-early":
            return self._seen_tokens
        return self.states[layer_idx][0].shape[1] if layer_idx < len(self.states) else 0

    def update(self, k, v, layer_idx):
        if layer_idx == 0:
            self._seen_tokens += k.shape[1]                                     # committed when layer 0 writes
        if layer_idx == len(self.states):
            self.states.append((k, v))
        else:
            past_k, past_v = self.states[layer_idx]
            self.states[layer_idx] = (torch.cat([past_k, k], dim=1), torch.cat([past_v, v], dim=1))   # [B, P+T, H, d]
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
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)[None, :, None, :]               # [1, T, 1, d]
        cos, sin = emb.cos(), emb.sin()
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin   # [rope]


class Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, layer_idx):
        super().__init__()
        self.num_heads, self.head_dim, self.layer_idx = num_heads, hidden_size // num_heads, layer_idx
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(hidden_size, hidden_size, bias=False)
                                                              for _ in range(4))
        self.rotary = RotaryEmbedding(self.head_dim)

    def forward(self, hidden_states, past_key_values):
        q = rearrange(self.q_proj(hidden_states), "... (h d) -> ... h d", d=self.head_dim)   # [B, T, H, d]
        k = rearrange(self.k_proj(hidden_states), "... (h d) -> ... h d", d=self.head_dim)
        v = rearrange(self.v_proj(hidden_states), "... (h d) -> ... h d", d=self.head_dim)
        seqlen_offset = past_key_values.get_seq_length(self.layer_idx)
        q, k = self.rotary(q, k, seqlen_offset=seqlen_offset)
        k, v = past_key_values.update(k, v, self.layer_idx)                     # [B, P+T, H, d]
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))                        # [B, H, *, d]
        o = F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] > 1)
        return self.o_proj(rearrange(o.transpose(1, 2), "... h d -> ... (h d)"))


class Model(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.layers = nn.ModuleList(Attention(hidden_size, num_heads, i) for i in range(2))

    def forward(self, prompt, token):
        cache = Cache(self.bug)
        for x in (prompt, token):                      # the prefill, then one decoding step
            for layer in self.layers:
                x = x + layer(x, cache)
        return x


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Model(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

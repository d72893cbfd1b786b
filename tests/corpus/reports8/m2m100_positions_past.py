"""huggingface/transformers issue #15736, fixed by PR #15751 ("[M2M100, XGLM] fix
create_position_ids_from_inputs_embeds", merged): the positions made from ``inputs_embeds`` ignored
``past_key_values_length``, so at a cached decoding step the new token took position ``padding_idx + 1`` (the
first position) again instead of ``padding_idx + 1 + past``: its sinusoidal embedding said "first token" at
every step. The fix adds the past length to the ``arange``.

The idiom (XGLM / M2M100): a sinusoidal table offset by ``padding_idx + 1``, looked up with ``index_select`` on
the flattened position ids and added to the scaled embeddings; then causal self-attention over the cache
(``_shape``: ``view(B, T, H, d).transpose(1, 2)``, the cache joined on the token axis, ``bmm`` on ``[B·H, T,
d]``). The model runs a prefill of T tokens, then one decoding step.

Bug (argument): ``positions-without-past``: the decoding step's positions start at the first position."""

import math
import sys

import torch
from torch import nn

BUGS = ("positions-without-past",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def sinusoidal_table(num_positions, dim, padding_idx):
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000.0) / (half - 1)))
    angles = torch.arange(num_positions, dtype=torch.float).unsqueeze(1) * freq.unsqueeze(0)    # (P, half)
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)                           # (P, dim)
    table[padding_idx, :] = 0
    return table


class Attention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(embed_dim, embed_dim) for _ in range(4))

    def _shape(self, t, seq_len, bsz):
        return t.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()   # (B, H, T, d)

    def forward(self, hidden, past=None):
        bsz, tgt_len, embed_dim = hidden.shape
        q = self._shape(self.q_proj(hidden) * self.scaling, tgt_len, bsz)
        k = self._shape(self.k_proj(hidden), tgt_len, bsz)
        v = self._shape(self.v_proj(hidden), tgt_len, bsz)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)                 # (B, H, S, d)
        src_len = k.size(2)
        shape = (bsz * self.num_heads, -1, self.head_dim)
        w = torch.bmm(q.reshape(shape), k.reshape(shape).transpose(1, 2))                       # (B·H, T, S)
        causal = torch.ones(tgt_len, src_len, dtype=torch.bool).tril(diagonal=src_len - tgt_len)
        w = w.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        out = torch.bmm(w, v.reshape(shape)).view(bsz, self.num_heads, tgt_len, self.head_dim)
        out = out.transpose(1, 2).reshape(bsz, tgt_len, embed_dim)                              # (B, T, D)
        return self.out_proj(out), (k, v)


class Decoder(nn.Module):
    def __init__(self, embed_dim, num_heads, max_positions=64, padding_idx=1, bug=""):
        super().__init__()
        self.padding_idx, self.bug = padding_idx, bug
        self.embed_scale = math.sqrt(embed_dim)
        self.register_buffer("weights", sinusoidal_table(max_positions + padding_idx + 1, embed_dim, padding_idx))
        self.attn = Attention(embed_dim, num_heads)

    def positions(self, inputs_embeds, past_len):
        bsz, seq_len = inputs_embeds.shape[:2]
        start = self.padding_idx + 1 + (0 if self.bug == "positions-without-past" else past_len)
        ids = torch.arange(start, start + seq_len).unsqueeze(0).expand(bsz, seq_len)         # (B, T)   [positions]
        return self.weights.index_select(0, ids.reshape(-1)).view(bsz, seq_len, -1)           # (B, T, D)

    def step(self, inputs_embeds, past=None):
        past_len = 0 if past is None else past[0].size(2)
        hidden = inputs_embeds * self.embed_scale + self.positions(inputs_embeds, past_len)
        return self.attn(hidden, past)

    def forward(self, prompt, token):
        _, past = self.step(prompt)
        out, _ = self.step(token, past)
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Decoder(D, H, bug=bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

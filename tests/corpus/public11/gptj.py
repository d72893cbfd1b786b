"""huggingface/transformers, src/transformers/models/gptj/modeling_gptj.py (v4.3x, ``GPTJAttention``): separate
``q_proj``/``k_proj``/``v_proj`` without bias, ``_split_heads`` to ``(B, T, H, d)`` with the rotary applied
there (before the permute), GPT-J's interleaved rotary on the first ``rotary_dim`` features of each head:
``fixed_pos_embedding`` (``einsum("i , j -> i j", positions, inv_freq)``), ``duplicate_interleave`` of sin and
cos, ``rotate_every_two`` (pairs 2i, 2i+1), the causal ``bias`` buffer applied with ``torch.where``.

Bugs (argument): ``rotate-half``: the rotation written as GPT-NeoX's ``rotate_half`` (pairs i, i + r/2) over
tables built for interleaved pairs (``duplicate_interleave``): the slip of porting a checkpoint between the
two rotary conventions (transformers issue #25199 and the many "rotary interleaved vs half" reports)."""

import sys

import torch
from torch import nn


def rotate_every_two(x):
    x1, x2 = x[:, :, :, ::2], x[:, :, :, 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)                    # (B, T, H, r)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def duplicate_interleave(m):
    return m.view(-1, 1).repeat(1, 2).view(m.shape[0], -1)              # (T, r)


def fixed_pos_embedding(dim, seq_len):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim))
    sinusoid_inp = torch.einsum("i , j -> i j", torch.arange(seq_len, dtype=torch.float), inv_freq)
    return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)             # (T, r/2)


class GPTJAttention(nn.Module):
    def __init__(self, d, h, bug="", max_positions=16):
        super().__init__()
        self.h, self.hd, self.bug = h, d // h, bug
        self.rotary_dim = self.hd // 2
        causal = torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool))
        self.register_buffer("bias", causal.view(1, 1, max_positions, max_positions), persistent=False)
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.out_proj = nn.Linear(d, d, bias=False)

    def _split_heads(self, x):
        return x.view(x.size()[:-1] + (self.h, self.hd))                   # (B, T, H, d)

    def _rotary(self, x, sin, cos):
        sin = duplicate_interleave(sin)[None, :, None, :]                   # (1, T, 1, r)
        cos = duplicate_interleave(cos)[None, :, None, :]
        rotate = rotate_half if self.bug == "rotate-half" else rotate_every_two
        return x * cos + rotate(x) * sin

    def forward(self, hidden_states):
        q = self._split_heads(self.q_proj(hidden_states))
        k = self._split_heads(self.k_proj(hidden_states))
        v = self._split_heads(self.v_proj(hidden_states)).permute(0, 2, 1, 3)   # (B, H, T, d)
        sin, cos = fixed_pos_embedding(self.rotary_dim, k.shape[1])
        r = self.rotary_dim
        k = torch.cat([self._rotary(k[:, :, :, :r], sin, cos), k[:, :, :, r:]], dim=-1)
        q = torch.cat([self._rotary(q[:, :, :, :r], sin, cos), q[:, :, :, r:]], dim=-1)
        q, k = q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3)                 # (B, H, T, d)
        t = q.size(-2)
        causal_mask = self.bias[:, :, :t, :t]                                # (1, 1, T, T)
        w = torch.matmul(q, k.transpose(-1, -2)) / self.hd**0.5             # (B, H, T, T)
        w = torch.where(causal_mask, w, torch.tensor(torch.finfo(w.dtype).min))
        w = nn.functional.softmax(w, dim=-1)
        out = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()           # (B, T, H, d)
        return self.out_proj(out.view(out.size()[:-2] + (self.h * self.hd,)))


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return GPTJAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


BUGS = ("rotate-half",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers, src/transformers/models/stablelm/modeling_stablelm.py (v4.4x, ``StableLmAttention``
with ``qk_layernorm=True`` and ``StableLmLayerNormPerHead``): q/k/v projections, a ``LayerNorm(head_dim)`` per
head applied by ``torch.split(hidden_states, 1, dim=1)`` over the heads of ``(B, H, T, d)`` and ``torch.cat``
back; partial rotary (``partial_rotary_factor = 0.25``: ``query_rot, query_pass = q[..., :rot], q[..., rot:]``)
with rotate_half; an additive causal mask; ``o_proj``.

Bugs (argument): ``unsqueeze-dim-2``: ``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2)`` on ``(B, H, T,
d)`` queries (the argument transformers documents for ``(B, T, H, d)`` layouts, kept after a port moved the
transpose before the rotary): the tables ``(B, T, 1, rot)`` line their tokens up with the heads, so each head
is turned by one position's angle for every token; it runs only where T = H.
Twins: ``cos-sin-swapped``: the rotation written ``q * sin + rotate_half(q) * cos``, the easy slip of the two
tables. It is ``R · rotate(-angle)``, R the fixed quarter turn ``rotate_half``: on random weights a rotary
embedding with its angles negated, the score still a function of the distance alone, so nothing torch records
can tell it from the correct file; it is a bug only against StableLM's checkpoints, so here it is a twin."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class StableLmLayerNormPerHead(nn.Module):
    def __init__(self, dim, num_heads, eps=1e-5):
        super().__init__()
        self.norms = nn.ModuleList([nn.LayerNorm(dim, eps=eps, bias=False) for _ in range(num_heads)])

    def forward(self, hidden_states):
        states_per_heads = torch.split(hidden_states, 1, dim=1)                       # H x (B, 1, T, d)
        return torch.cat([norm(h) for norm, h in zip(self.norms, states_per_heads)], dim=1)   # (B, H, T, d)


class StableLmAttention(nn.Module):
    def __init__(self, d, h, bug=""):
        super().__init__()
        self.h, self.hd, self.bug = h, d // h, bug
        self.rot = int(self.hd * 0.25)
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d, d) for _ in range(3))
        self.o_proj = nn.Linear(d, d, bias=False)
        self.q_layernorm = StableLmLayerNormPerHead(self.hd, h)
        self.k_layernorm = StableLmLayerNormPerHead(self.hd, h)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, self.rot, 2).float() / self.rot)))

    def _rope(self, x, cos, sin):
        unsqueeze_dim = 2 if self.bug == "unsqueeze-dim-2" else 1
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)   # (B, 1, T, rot)
        if self.bug == "cos-sin-swapped":
            return x * sin + rotate_half(x) * cos
        return x * cos + rotate_half(x) * sin

    def forward(self, hidden_states, position_ids):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.h, self.hd).transpose(1, 2)   # (B, H, T, d)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.h, self.hd).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.h, self.hd).transpose(1, 2)
        q, k = self.q_layernorm(q), self.k_layernorm(k)
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)  # (B, T, rot/2)
        emb = torch.cat((freqs, freqs), dim=-1)                               # (B, T, rot)
        cos, sin = emb.cos(), emb.sin()
        q_rot, q_pass = q[..., : self.rot], q[..., self.rot :]
        k_rot, k_pass = k[..., : self.rot], k[..., self.rot :]
        q = torch.cat((self._rope(q_rot, cos, sin), q_pass), dim=-1)         # (B, H, T, d)
        k = torch.cat((self._rope(k_rot, cos, sin), k_pass), dim=-1)
        mask = torch.full((q_len, q_len), float("-inf")).triu(1)
        w = torch.matmul(q, k.transpose(2, 3)) / self.hd**0.5 + mask        # (B, H, T, T)
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()               # (B, T, H, d)
        return self.o_proj(out.reshape(bsz, q_len, -1))


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    positions = torch.arange(T).unsqueeze(0).expand(B, T)
    return StableLmAttention(D, H, bug).eval(), (torch.randn(B, T, D), positions)


BUGS = ("unsqueeze-dim-2",)
TWINS = ("cos-sin-swapped",)
DIMS = ("B=2 T=6 D=64 H=4",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

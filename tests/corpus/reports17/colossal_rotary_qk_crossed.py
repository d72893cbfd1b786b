"""hpcaitech/ColossalAI issue #6428 ("[BUG]: Q/K cross-wiring in `fused_rotary_emb` Triton kernel"; fixed by
PRs #6429 and #6444): the fused kernel that rotates the query and the key in one pass computed two of its
four halves from the wrong tensor: ``out_q1 = k_0 * sin + k_1 * cos`` (the query's second half from the key)
and ``out_k0 = q_0 * cos - q_1 * sin`` (the key's first half from the query). Every shape stays right; the
rotated query and key are then the same tensor, ``[rot(q)_0, rot(k)_1]``, and the scores compare that with
itself.

The idiom (ColossalAI's inference path, the kernel's torch reference written out): ``q_proj``/``k_proj``/
``v_proj`` viewed ``(B, T, H, d)``, ``cos``/``sin`` of width ``d/2`` gathered from a ``cos_cache`` by the
token positions, the half-split rotation of both tensors in one function (``x_0 = x[..., :d/2]``,
``x_1 = x[..., d/2:]``, ``out_0 = x_0 cos - x_1 sin``, ``out_1 = x_0 sin + x_1 cos``), then ``transpose(1, 2)``,
scores ``/ sqrt(d)``, a causal mask, ``softmax``, merge, ``o_proj``.

Bug (argument): ``qk-crossed``: the kernel's cross-wiring (``out_q1`` from ``k``, ``out_k0`` from ``q``)."""

import sys

import torch
from torch import nn

BUGS = ("qk-crossed",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def get_cos_sin(head_dim, max_len, base=10000.0):
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    freqs = torch.outer(torch.arange(max_len).float(), inv_freq)                      # (L, d/2)
    return freqs.cos(), freqs.sin()


def fused_rotary_emb(q, k, cos, sin, bug=""):
    half = q.shape[-1] // 2
    cos, sin = cos[:, None, :], sin[:, None, :]                                       # (T, 1, d/2)
    q_0, q_1 = q[..., :half], q[..., half:]
    k_0, k_1 = k[..., :half], k[..., half:]
    out_q0 = q_0 * cos - q_1 * sin
    out_k1 = k_0 * sin + k_1 * cos
    if bug == "qk-crossed":
        out_q1 = k_0 * sin + k_1 * cos                                                 # [rope]
        out_k0 = q_0 * cos - q_1 * sin                                                 # [rope]
    else:
        out_q1 = q_0 * sin + q_1 * cos                                                 # [rope]
        out_k0 = k_0 * cos - k_1 * sin                                                 # [rope]
    return torch.cat((out_q0, out_q1), dim=-1), torch.cat((out_k0, out_k1), dim=-1)


class NopadLlamaAttention(nn.Module):
    def __init__(self, hidden, heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = heads, hidden // heads, bug
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(hidden, hidden, bias=False) for _ in range(4))
        cos_cache, sin_cache = get_cos_sin(self.head_dim, 64)
        self.register_buffer("cos_cache", cos_cache)
        self.register_buffer("sin_cache", sin_cache)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.shape
        shape = (bsz, q_len, self.num_heads, self.head_dim)
        q = self.q_proj(hidden_states).view(shape)                                     # (B, T, H, d)
        k = self.k_proj(hidden_states).view(shape)
        v = self.v_proj(hidden_states).view(shape)
        positions = torch.arange(q_len)
        cos, sin = self.cos_cache[positions], self.sin_cache[positions]                # (T, d/2)
        q, k = fused_rotary_emb(q, k, cos, sin, self.bug)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)              # (B, H, T, d)
        scores = torch.matmul(q, k.transpose(2, 3)) / self.head_dim ** 0.5
        causal = torch.ones(q_len, q_len, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return NopadLlamaAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

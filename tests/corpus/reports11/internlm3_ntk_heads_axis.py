"""ml-explore/mlx-lm issue #1545, fixed by PR #1553 ("Fix internlm3 dynamic-NTK RoPE: wrong seq axis,
scale/factor conflation"): InternLM3's dynamic-NTK rotary read the sequence length as ``x.shape[1]`` of the
queries it was given, but those were already ``[B, n_heads, L, head_dim]``: ``shape[1]`` is the head count,
so the base was rescaled (or not) by the number of heads, never by the prompt's length (the recompute could
not fire at prefill; with few heads and a long prompt the positions past the trained length kept the
unscaled base). The fix reads ``shape[2]``, checked against InternLM's reference ``modeling_internlm3.py``.

The idiom: InternLM3's attention (``q_proj``/``k_proj``/``v_proj``/``o_proj`` without bias,
``view(B, T, H, d).transpose(1, 2)``), a ``DynamicNTKScalingRotaryEmbedding`` called on the transposed
queries that recomputes ``base * ((factor · seq_len / max_pos) - (factor - 1)) ** (d / (d - 2))`` when the
sequence is longer than ``max_position_embeddings`` (4 here, so a 6-token prompt exceeds it),
``rotate_half`` on ``cat([freqs, freqs])``, a causal mask, ``softmax`` in float32.

Twin (argument): ``seq-len-from-heads``: the length read from ``shape[1]`` (the heads) of the ``[B, H, T, d]``
queries. At T = 6 and H = 4 the branch is not taken and the base stays 10000: the run records exactly the ops
of a correct rotary without scaling (a model trained on 6 tokens or more), the one difference a Python float
the length went into (``x.shape[1]`` is an int torch does not see used); which base the model was trained
with is its configuration's, so the trace cannot tell the two apart."""

import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("seq-len-from-heads",)
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class DynamicNTKScalingRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=4, base=10000.0, scaling_factor=2.0, bug=""):
        super().__init__()
        self.dim, self.max_pos, self.base = dim, max_position_embeddings, base
        self.factor, self.bug = scaling_factor, bug

    def forward(self, x):                                                       # (B, H, T, d)
        seq_len = x.shape[1] if self.bug == "seq-len-from-heads" else x.shape[2]
        base = self.base
        if seq_len > self.max_pos:
            base = base * ((self.factor * seq_len / self.max_pos) - (self.factor - 1)) ** (self.dim / (self.dim - 2))
        inv_freq = 1.0 / base ** (torch.arange(0, self.dim, 2).float() / self.dim)
        t = torch.arange(x.shape[2], dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)                                        # (T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                 # (T, d)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class InternLM3Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.rotary_emb = DynamicNTKScalingRotaryEmbedding(self.head_dim, bug=bug)

    def forward(self, hidden_states):                                           # (B, T, D)
        b, t, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(b, t, self.heads, self.head_dim).transpose(1, 2)   # (B, H, T, d)
        k = self.k_proj(hidden_states).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(q)                                           # [rope]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        w = torch.matmul(q, k.transpose(2, 3)) / self.head_dim ** 0.5          # (B, H, T, T)
        causal = torch.full((t, t), torch.finfo(w.dtype).min).triu(1)
        w = nn.functional.softmax(w + causal, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).reshape(b, t, -1)              # (B, T, D)
        return self.o_proj(out)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return InternLM3Attention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

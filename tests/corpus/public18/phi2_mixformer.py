"""microsoft/phi-2 (and phi-1_5), modeling_phi.py of the original MixFormer release (``MHA``, ``SelfAttention``,
``RotaryEmbedding``, ``_apply_rotary_emb_qkv``): one ``Wqkv`` Linear(D, 3D), ``rearrange(qkv, "... (three h d) ->
... three h d", three=3, d=head_dim)``; partial rotary on the first ``rotary_dim`` features of each head (here
half of them), q and k rotated inside the packed ``qkv`` (``qkv[:, :, :2, :, :rotary_dim]`` split in two halves);
``q, k, v = qkv.unbind(dim=2)``; ``torch.einsum("bthd,bshd->bhts", q, k * softmax_scale)``; the causal mask
``torch.triu(full((T, T), -10000.0), 1)`` added; softmax over the last axis; ``einsum("bhts,bshd->bthd")``;
``rearrange(..., "... h d -> ... (h d)")``; ``out_proj``.

Bugs (argument): ``scores-transposed``: the score einsum written ``"bthd,bshd->bhst"`` (the natural slip of a port
to ``s`` for keys first), so the softmax over the last axis runs over the queries. A twin, ``merge-heads-first``:
the context merged by ``rearrange(..., "b t h d -> b t (d h)")`` (each head's width outer: a fixed permutation of
the features ``out_proj`` reads, consistent on weights learnt so, as tests/engine/test_heads.py's
``InterleavedMerge`` holds with ``✓``; it would misread a checkpoint's ``out_proj``, which nothing recorded
shows)."""

import sys

import torch
from einops import rearrange
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.dim = dim
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, qkv):                                                        # (B, T, 3, H, d)
        seqlen = qkv.shape[1]
        t = torch.arange(seqlen, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)                                        # (T, r/2)
        cos, sin = torch.cos(freqs), torch.sin(freqs)
        q_rot, q_pass = qkv[:, :, 0, :, : self.dim], qkv[:, :, 0, :, self.dim :]
        k_rot, k_pass = qkv[:, :, 1, :, : self.dim], qkv[:, :, 1, :, self.dim :]
        c, s = cos[:, None, :], sin[:, None, :]                                      # (T, 1, r/2)
        q1, q2 = q_rot.chunk(2, dim=-1)
        k1, k2 = k_rot.chunk(2, dim=-1)
        q_rot = torch.cat([q1 * c - q2 * s, q1 * s + q2 * c], dim=-1)
        k_rot = torch.cat([k1 * c - k2 * s, k1 * s + k2 * c], dim=-1)
        q = torch.cat([q_rot, q_pass], dim=-1)
        k = torch.cat([k_rot, k_pass], dim=-1)
        return torch.stack([q, k, qkv[:, :, 2]], dim=2)                              # (B, T, 3, H, d)


class MHA(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.n_head, self.head_dim, self.bug = heads, dim // heads, bug
        self.rotary_emb = RotaryEmbedding(self.head_dim // 2)
        self.Wqkv = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x):                                                          # (B, T, D)
        qkv = self.Wqkv(x)
        qkv = rearrange(qkv, "... (three h d) -> ... three h d", three=3, d=self.head_dim)
        qkv = self.rotary_emb(qkv)
        q, k, v = qkv.unbind(dim=2)                                                  # (B, T, H, d)
        seqlen = q.shape[1]
        softmax_scale = 1.0 / self.head_dim**0.5
        if self.bug == "scores-transposed":
            scores = torch.einsum("bthd,bshd->bhst", q, k * softmax_scale)
        else:
            scores = torch.einsum("bthd,bshd->bhts", q, k * softmax_scale)         # (B, H, T, S)
        causal_mask = torch.triu(torch.full((seqlen, seqlen), -10000.0), 1)
        scores = scores + causal_mask
        attention = torch.softmax(scores, dim=-1)
        output = torch.einsum("bhts,bshd->bthd", attention, v)                      # (B, T, H, d)
        if self.bug == "merge-heads-first":
            output = rearrange(output, "b t h d -> b t (d h)")
        else:
            output = rearrange(output, "... h d -> ... (h d)")
        return self.out_proj(output)


class ParallelBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.mixer = MHA(dim, heads, bug)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.ln(x)
        return x + self.mixer(h) + self.fc2(nn.functional.gelu(self.fc1(h)))


BUGS = ("scores-transposed",)
TWINS = ("merge-heads-first",)
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    model = nn.Sequential(ParallelBlock(D, H, bug), ParallelBlock(D, H, bug)).eval()
    return model, (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""RobertCsordas/moeut pull request #6 ("fix rope positions for incremental output"): in ``moeut/moeut.py``,
``SwitchHeadCore.forward`` computes ``pos_offset = q_src.shape[1] - k_src.shape[1]`` from its inputs, before the
cached keys and values are joined on (``torch.cat([kv_cache["k"], k], dim=-2)``). In token-by-token decoding both
inputs hold the one new token, so the offset is 0 and ``SwitchHeadRope.attend`` rotates the query as if it sat at
position 0 while the keys (the whole cache, rotated ``0 .. K-1`` on every call) are at their true positions. The PR
derives the offset from the final concatenated key length (``k.shape[-2] - q.shape[-2]``) and adds a test that
incremental decoding gives the full-sequence output (it fails on the original code).

The idiom (``SwitchHeadRope`` with ``n_experts = 1``, its dense path): ``q``/``k`` ``Linear`` without bias, both
scaled by ``scale.sqrt()`` (and ``scaled_dot_product_attention(..., scale=1.0)``), ``v = F.linear(v_src,
self.v)``, ``project_to_torch_order`` (``view(*shape[:-1], n_heads, -1).transpose(-2, -3)``), the cache of
unrotated keys and values, ``RotaryPosEncoding`` on the first half of each head's channels
(``rotate_fraction=0.5``; ``narrow(seq_dim, offset, len)`` of the cached table, the query at ``offset``, the keys
at 0), the mask True where masked (so ``~mask`` to SDPA), the output gated by ``sigmoid(F.linear(q_src,
self.sel_o))`` per head, ``F.linear(res.flatten(-2), self.o)``. A prefill of T tokens, then one decoded token.

Bugs: ``offset-before-cache``: ``pos_offset`` from the inputs' lengths (the reported code: 0 for the decoded
token); ``mask-not-inverted``: the moeut mask (True = masked) handed to SDPA as it is (True = attend), so each
prefill token attends only to the tokens after it."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("offset-before-cache", "mask-not-inverted")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class RotaryPosEncoding(nn.Module):
    def __init__(self, d_model, base=10000, seq_dim=-2):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, d_model, 2).float() / d_model)),
                             persistent=False)
        self.seq_dim = seq_dim

    def rotate_half(self, x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=x1.ndim - 1)

    def apply_rot(self, x, sin, cos, offset):
        sin = sin.narrow(self.seq_dim, offset, x.shape[self.seq_dim])                   # (1, 1, L, r)
        cos = cos.narrow(self.seq_dim, offset, x.shape[self.seq_dim])
        return (x * cos) + (self.rotate_half(x) * sin)

    def forward(self, q, k, pos_offset=0):
        seq_len = k.shape[self.seq_dim]
        t = torch.arange(seq_len).type_as(self.inv_freq)
        emb = torch.cat((torch.einsum("i,j->ij", t, self.inv_freq),) * 2, dim=-1)      # (K, r)
        sin, cos = emb.sin().view(1, 1, seq_len, -1), emb.cos().view(1, 1, seq_len, -1)
        return self.apply_rot(q, sin, cos, pos_offset), self.apply_rot(k, sin, cos, 0)


class SwitchHeadRope(nn.Module):
    def __init__(self, state_size, n_heads, rotate_fraction=0.5, bug=""):
        super().__init__()
        self.n_heads, self.bug = n_heads, bug
        self.projection_size = state_size // n_heads
        self.q = nn.Linear(state_size, self.projection_size * n_heads, bias=False)
        self.k = nn.Linear(state_size, self.projection_size * n_heads, bias=False)
        self.v = nn.Parameter(torch.randn(n_heads * self.projection_size, state_size) / math.sqrt(state_size))
        self.o = nn.Parameter(torch.randn(state_size, n_heads * self.projection_size) / math.sqrt(state_size))
        self.sel_o = nn.Parameter(torch.randn(n_heads, state_size) / math.sqrt(state_size))
        self.register_buffer("scale", torch.full([1], 1.0 / math.sqrt(self.projection_size)), persistent=False)
        self.n_rotate = int(rotate_fraction * self.projection_size)
        self.n_rotate -= self.n_rotate % 2
        self.pe = RotaryPosEncoding(self.n_rotate, seq_dim=-2)

    def project_to_torch_order(self, x):
        return x.view(*x.shape[:-1], self.n_heads, -1).transpose(-2, -3)               # (B, H, T, d)

    def attend(self, pos_offset, v, k, q, mask):
        r_q, nr_q = q[..., :self.n_rotate], q[..., self.n_rotate:]
        r_k, nr_k = k[..., :self.n_rotate], k[..., self.n_rotate:]
        r_q, r_k = self.pe(r_q, r_k, pos_offset)
        q, k = torch.cat([r_q, nr_q], dim=-1), torch.cat([r_k, nr_k], dim=-1)         # (B, H, T, d), (B, H, K, d)
        attn_mask = None if mask is None else (mask if self.bug == "mask-not-inverted" else ~mask)
        return F.scaled_dot_product_attention(q, k, v, attn_mask, scale=1.0)           # (B, H, T, d)

    def forward(self, q_src, k_src, v_src, mask, kv_cache=None):                       # (B, T, D) each
        pos_offset = q_src.shape[1] - k_src.shape[1]
        scale = self.scale.sqrt()
        q, k = self.q(q_src) * scale, self.k(k_src) * scale
        o_gate = torch.sigmoid(F.linear(q_src, self.sel_o))                            # (B, T, H)
        v = self.project_to_torch_order(F.linear(v_src, self.v))                       # (B, H, T, d)
        q, k = self.project_to_torch_order(q), self.project_to_torch_order(k)         # (B, H, T, d)
        if kv_cache is not None:
            v = torch.cat([kv_cache["v"], v], dim=-2)                                  # (B, H, K, d)
            k = torch.cat([kv_cache["k"], k], dim=-2)                                  # (B, H, K, d)
        kv_cache = {"v": v, "k": k}
        if self.bug != "offset-before-cache":
            pos_offset = k.shape[-2] - q.shape[-2]
        res = self.attend(pos_offset, v, k, q, mask).transpose(-2, -3)                # (B, T, H, d)
        res = res * o_gate[..., None]
        return F.linear(res.flatten(-2), self.o), kv_cache                             # (B, T, D)


class MoEUTDecoder(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.attention = SwitchHeadRope(d_model, n_heads, bug=bug)
        self.att_norm = nn.LayerNorm(d_model)

    def forward(self, prompt, token):                                                  # (B, T, D), (B, 1, D)
        T = prompt.shape[1]
        position_mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)    # True = masked
        h = self.att_norm(prompt)
        out, cache = self.attention(h, h, h, position_mask)
        h = self.att_norm(token)
        step, _ = self.attention(h, h, h, None, kv_cache=cache)                        # (B, 1, D)
        return prompt + out, token + step


def build(bug="", B=2, T=6, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    return MoEUTDecoder(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

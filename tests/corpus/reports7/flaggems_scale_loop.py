"""flagos-ai/FlagGems issue #409, fixed by PR #424 ("fix attention blowup.", merged; "qk_scale mistakenly got
scaled up every iteration. Now fixed."; MARD1NO: "I forget the ``qk_scale *= M_LOG2E`` changed in each
iteration"): the flash-attention kernel's inner loop over key blocks folded ``log2(e)`` into the scale in
place, ``qk_scale *= 1.44269504`` then ``qk = qk * qk_scale - m_ij``: the first block was scaled by
``sm_scale · log2 e``, the second by ``sm_scale · (log2 e)²``, and so on, so later keys' logits grew with
their block's index. The fix multiplies by the constant without writing it back.

FlagGems is Triton; here its ``_attn_fwd_inner`` in torch, in its terms: an online softmax over blocks of
``BLOCK_N`` keys, ``qk = q @ kᵀ``, the running max ``m_i``/``m_ij``, ``exp2``, the rescale ``alpha``, the
running sum ``l_i`` and accumulator ``acc``; the queries ``(B, H, T, d)`` against all T keys in two blocks.

Bug (argument): ``scale-grows-per-block``: ``qk_scale *= 1.44269504`` inside the loop."""

import sys

import torch
from torch import nn

BUGS = ("scale-grows-per-block",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
BLOCK_N = 3


def attn_fwd_inner(q, k, v, qk_scale, bug=""):
    n_ctx = k.shape[2]
    m_i = torch.full(q.shape[:-1], float("-inf"))
    l_i = torch.zeros(q.shape[:-1])
    acc = torch.zeros_like(q)
    for start_n in range(0, n_ctx, BLOCK_N):
        kb, vb = k[:, :, start_n:start_n + BLOCK_N], v[:, :, start_n:start_n + BLOCK_N]
        qk = q @ kb.transpose(-1, -2)                                                 # (B, H, T, BLOCK_N)
        if bug == "scale-grows-per-block":
            qk_scale = qk_scale * 1.44269504
            qk = qk * qk_scale                                                        # [scale]
        else:
            qk = qk * (qk_scale * 1.44269504)                                         # [scale]
        m_ij = torch.maximum(m_i, qk.amax(-1))
        p = torch.exp2(qk - m_ij[..., None])
        alpha = torch.exp2(m_i - m_ij)
        l_i = l_i * alpha + p.sum(-1)
        acc = acc * alpha[..., None] + p @ vb
        m_i = m_ij
    return acc / l_i[..., None]


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        out = attn_fwd_inner(q, k, v, self.head_dim ** -0.5, self.bug)                # (B, H, T, d)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, D))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Attention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""microsoft/torchscale, torchscale/architecture/retnet.py (``RetNetRelPos``) and
torchscale/component/multiscale_retention.py (``MultiScaleRetention.parallel_forward``, ``theta_shift``,
``rotate_every_two``; https://github.com/microsoft/torchscale): a per-head decay ``decay = torch.log(1 - 2
** (-5 - torch.arange(num_heads)))``; the decay mask ``mask = torch.tril(torch.ones(slen, slen))``,
``torch.masked_fill(index[:, None] - index[None, :], ~mask.bool(), float("inf"))``, ``torch.exp(mask *
self.decay[:, None, None])``, ``nan_to_num`` and ``mask / mask.sum(dim=-1, keepdim=True).sqrt()``: ``(H,
T, S)`` with gamma^(n-m) below the diagonal; xPos-style ``theta_shift`` on queries and keys; ``qk_mat =
qr @ kr.transpose(-1, -2)``, ``qk_mat * mask``, normalised by ``qk_mat.detach().abs().sum(dim=-1,
keepdim=True).clamp(min=1)``; ``torch.matmul(qk_mat, vr).transpose(1, 2)``; a per-head norm, then
``reshape(bsz, tgt_len, self.head_dim * self.num_heads)`` and the swish gate.

Bugs (argument): ``decay-future``: the mask built with ``torch.triu`` and ``index[None, :] - index[:,
None]``: the decay transposed, so each query sums the future tokens (a retention that leaks);
``norm-over-heads``: the retention normalised by ``qk_mat.abs().sum(dim=1, keepdim=True)``: a sum over
the heads, so each head's scores depend on the other heads'."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("decay-future", "norm-over-heads")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)  # (B, H, T, d_k)


def theta_shift(x, sin, cos):
    return (x * cos) + (rotate_every_two(x) * sin)


class RetNetRelPos(nn.Module):
    def __init__(self, embed_dim=32, num_heads=4, bug=""):
        super().__init__()
        self.bug = bug
        angle = 1.0 / (10000 ** torch.linspace(0, 1, embed_dim // num_heads // 2))
        angle = angle.unsqueeze(-1).repeat(1, 2).flatten()  # (d_k,)
        decay = torch.log(1 - 2 ** (-5 - torch.arange(num_heads, dtype=torch.float)))  # (H,)
        self.register_buffer("angle", angle)
        self.register_buffer("decay", decay)

    def forward(self, slen):
        index = torch.arange(slen).to(self.decay)
        sin = torch.sin(index[:, None] * self.angle[None, :])  # (T, d_k)
        cos = torch.cos(index[:, None] * self.angle[None, :])  # (T, d_k)
        if self.bug == "decay-future":
            mask = torch.triu(torch.ones(slen, slen).to(self.decay))  # bug: the future decays
            mask = torch.masked_fill(index[None, :] - index[:, None], ~mask.bool(), float("inf"))
        else:
            mask = torch.tril(torch.ones(slen, slen).to(self.decay))
            mask = torch.masked_fill(index[:, None] - index[None, :], ~mask.bool(), float("inf"))  # (T, S)
        mask = torch.exp(mask * self.decay[:, None, None])  # (H, T, S)
        mask = torch.nan_to_num(mask)
        mask = mask / mask.sum(dim=-1, keepdim=True).sqrt()
        return (sin, cos), mask


class MultiScaleRetention(nn.Module):
    def __init__(self, embed_dim=32, value_dim=32, num_heads=4, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads = num_heads
        self.head_dim = value_dim // num_heads
        self.key_dim = embed_dim // num_heads
        self.scaling = self.key_dim**-0.5
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, value_dim, bias=False)
        self.g_proj = nn.Linear(embed_dim, value_dim, bias=False)
        self.out_proj = nn.Linear(value_dim, embed_dim, bias=False)
        self.group_norm = nn.LayerNorm(self.head_dim, elementwise_affine=False)

    def parallel_forward(self, qr, kr, v, mask):
        bsz, tgt_len, embed_dim = v.size()
        vr = v.view(bsz, tgt_len, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, d_v)
        qk_mat = qr @ kr.transpose(-1, -2)  # (B, H, T, S)
        qk_mat = qk_mat * mask
        norm_dim = 1 if self.bug == "norm-over-heads" else -1  # bug: a sum over the heads
        qk_mat = qk_mat / qk_mat.detach().abs().sum(dim=norm_dim, keepdim=True).clamp(min=1, max=5e4)
        output = torch.matmul(qk_mat, vr)  # (B, H, T, d_v)
        return output.transpose(1, 2)  # (B, T, H, d_v)

    def forward(self, x, rel_pos):
        bsz, tgt_len, _ = x.size()
        (sin, cos), inner_mask = rel_pos
        q = self.q_proj(x)
        k = self.k_proj(x)
        v = self.v_proj(x)
        g = self.g_proj(x)
        k = k * self.scaling
        q = q.view(bsz, tgt_len, self.num_heads, self.key_dim).transpose(1, 2)  # (B, H, T, d_k)
        k = k.view(bsz, tgt_len, self.num_heads, self.key_dim).transpose(1, 2)  # (B, H, T, d_k)
        qr = theta_shift(q, sin, cos)
        kr = theta_shift(k, sin, cos)
        output = self.parallel_forward(qr, kr, v, inner_mask)
        output = self.group_norm(output).reshape(bsz, tgt_len, self.head_dim * self.num_heads)  # (B, T, D)
        output = F.silu(g) * output
        return self.out_proj(output)


class RetNetLayer(nn.Module):
    def __init__(self, embed_dim=32, num_heads=4, bug=""):
        super().__init__()
        self.retnet_rel_pos = RetNetRelPos(embed_dim, num_heads, bug)
        self.retention = MultiScaleRetention(embed_dim, embed_dim, num_heads, bug)

    def forward(self, x):
        return self.retention(x, self.retnet_rel_pos(x.size(1)))


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4'."""
    torch.manual_seed(0)
    return RetNetLayer(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

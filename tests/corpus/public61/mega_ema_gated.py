"""facebookresearch/mega, fairseq/modules/exponential_moving_average.py (``MultiHeadEMA``: ``_calc_coeffs``,
``_compute_kernel``, ``forward``), fairseq/modules/moving_average_gated_attention.py
(``MovingAverageGatedAttention.forward`` and ``softmax_attention``) and fairseq/modules/relative_positional_bias.py
(``SimpleRelativePositionalBias``): Mega's single-head gated attention, sequence-first (``L x B x D``). The EMA is a
damped, per-channel ``ndim``-dimensional moving average turned into a ``D x L`` convolution kernel (``vander =
arange(L) * log(q)``, ``kernel = p * beta * exp(vander)``, ``einsum('dnl,dn->dl', kernel, gamma * scale)``) and
applied by FFT over the length (``x.permute(1, 2, 0)`` to ``B x D x L``, ``rfft(n=2 * L)`` for a linear, causal
convolution, ``irfft(...)[..., :L]``), plus ``x * omega``, ``silu``. Its output ``mx`` feeds ``mx_proj`` split into
``u`` (update gate), ``zr`` (shared q/k base and reset gate) and ``hx``; ``q, k = unbind(z.unsqueeze(2) * gamma +
beta, dim=2)``; every ``L x B x S`` tensor transposed to ``B x L x S``; ``bmm(q * scaling, k^T) + bias`` with the
relative bias built by the pad/tile/view trick, a causal ``attn_mask`` (``-inf`` above the diagonal),
``softmax(dim=-1)``; ``bmm(attn, v).transpose(0, 1)`` back to ``L x B x E``; ``h_proj(h * r)``, ``addcmul``.

Bugs: ``ema-fft-circular``: ``rfft(..., n=L)`` for both (no zero padding: a circular convolution, so the last
tokens wrap around into the first tokens' moving average, a leak from the future in a causal decoder);
``h-view-not-transpose``: ``bmm(kernel, v).view(seq_len, bsz, -1)`` (``B x L x E`` read as ``L x B x E`` without
moving the axes: batch rows and tokens interleaved); ``rel-bias-transposed``: ``qk + bias.t()`` (the relative
positions read ``j - i`` instead of ``i - j``: the learned bias of "k tokens back" applied to "k tokens ahead")."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadEMA(nn.Module):
    def __init__(self, embed_dim, ndim=2, bug=""):
        super().__init__()
        self.ndim, self.bug, self.scale = ndim, bug, math.sqrt(1.0 / ndim)
        self.delta = nn.Parameter(torch.randn(embed_dim, ndim, 1) * 0.2)
        self.alpha = nn.Parameter(torch.randn(embed_dim, ndim, 1) * 0.2)
        self.beta = nn.Parameter(torch.randn(embed_dim, ndim, 1) * 0.02 + 1.0)
        self.gamma = nn.Parameter(torch.randn(embed_dim, ndim))
        self.omega = nn.Parameter(torch.randn(embed_dim))

    def _compute_kernel(self, length):
        p, alpha = torch.sigmoid(self.delta), torch.sigmoid(self.alpha)
        q = 1.0 - p * alpha
        vander = torch.arange(length).to(p).view(1, 1, length) * torch.log(q)      # (D, N, L)
        kernel = (p * self.beta) * torch.exp(vander)                                 # (D, N, L)
        return torch.einsum('dnl,dn->dl', kernel, self.gamma * self.scale)           # (D, L)

    def forward(self, x):
        seq_len, bsz, embed_dim = x.size()
        residual = x * self.omega
        x = x.permute(1, 2, 0)                                                       # B x D x L
        k = self._compute_kernel(seq_len)                                            # D x L
        fft_len = seq_len if self.bug == "ema-fft-circular" else 2 * seq_len
        k_f = torch.fft.rfft(k.float(), n=fft_len)
        x_f = torch.fft.rfft(x.float(), n=fft_len)
        out = torch.fft.irfft(x_f * k_f, n=fft_len)[..., :seq_len]                   # B x D x L
        return F.silu(out.permute(2, 0, 1) + residual)                               # L x B x D


class SimpleRelativePositionalBias(nn.Module):
    def __init__(self, max_positions=16):
        super().__init__()
        self.max_positions = max_positions
        self.rel_pos_bias = nn.Parameter(torch.randn(2 * max_positions - 1) * 0.02)

    def forward(self, seq_len):
        b = self.rel_pos_bias[(self.max_positions - seq_len):(self.max_positions + seq_len - 1)]   # (2L - 1)
        t = F.pad(b, (0, seq_len))                                                   # (3L - 1)
        t = torch.tile(t, (seq_len,))[:-seq_len]                                     # (L·(3L - 1) - L)
        t = t.view(seq_len, 3 * seq_len - 2)                                         # (L, 3L - 2)
        r = (2 * seq_len - 1) // 2
        return t[:, r:t.size(1) - r]                                                 # (L, L)


class MovingAverageGatedAttention(nn.Module):
    def __init__(self, embed_dim, zdim, hdim, bug=""):
        super().__init__()
        self.embed_dim, self.zdim, self.hdim, self.bug = embed_dim, zdim, hdim, bug
        self.scaling = zdim ** -0.5
        self.v_proj = nn.Linear(embed_dim, hdim)
        self.mx_proj = nn.Linear(embed_dim, zdim + hdim + 2 * embed_dim)
        self.h_proj = nn.Linear(hdim, embed_dim)
        self.gamma = nn.Parameter(torch.randn(2, zdim) * 0.02 + 1.0)
        self.beta = nn.Parameter(torch.zeros(2, zdim))
        self.move = MultiHeadEMA(embed_dim, bug=bug)
        self.rel_pos_bias = SimpleRelativePositionalBias()

    def softmax_attention(self, q, k, attn_mask):
        slen = k.size(1)
        bias = self.rel_pos_bias(slen)                                               # L x L
        if self.bug == "rel-bias-transposed":
            bias = bias.t()
        q = q * self.scaling
        qk = torch.bmm(q, k.transpose(1, 2)) + bias + attn_mask                      # B x L x L
        return F.softmax(qk, dim=-1)

    def forward(self, x, attn_mask):
        seq_len, bsz, embed_dim = x.size()
        residual = x
        v = F.silu(self.v_proj(x))                                                   # L x B x E
        mx = self.move(x)                                                            # L x B x D
        base = self.mx_proj(mx)                                                      # L x B x (2D + S + E)
        u, zr, hx = torch.split(base, [self.embed_dim, self.zdim + self.hdim, self.embed_dim], dim=-1)
        u = torch.sigmoid(u)
        z, r = torch.split(F.silu(zr), [self.zdim, self.hdim], dim=-1)               # L x B x S, L x B x E
        z = z.unsqueeze(2) * self.gamma + self.beta                                  # L x B x 2 x S
        q, k = torch.unbind(z, dim=2)                                                # L x B x S
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)            # B x L x S, B x L x E
        attn_weights = self.softmax_attention(q, k, attn_mask)                       # B x L x L
        if self.bug == "h-view-not-transpose":
            h = torch.bmm(attn_weights, v).view(seq_len, bsz, -1)
        else:
            h = torch.bmm(attn_weights, v).transpose(0, 1)                           # L x B x E
        h = F.silu(hx + self.h_proj(h * r))                                          # L x B x D
        return torch.addcmul(residual, u, h - residual)


BUGS = ("ema-fft-circular", "h-view-not-transpose", "rel-bias-transposed")
TWINS = ()
DIMS = ("B=2 T=5 D=32",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32"}


def build(bug="", B=2, T=5, D=32):  # noqa: N803
    """One causal Mega layer on a sequence-first ``T x B x D`` input (``zdim = D / 2``, ``hdim = 2 D``)."""
    torch.manual_seed(0)
    model = MovingAverageGatedAttention(D, D // 2, 2 * D, bug=bug)
    attn_mask = torch.triu(torch.full((T, T), float("-inf")), 1)
    return model.eval(), (torch.randn(T, B, D), attn_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

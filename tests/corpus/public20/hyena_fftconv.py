"""HazyResearch/safari, src/models/sequence/hyena.py (``fftconv``, ``HyenaOperator``, 2023): ``u = in_proj(u)``
``(B, L, 3·D)`` -> ``rearrange('b l d -> b d l')``; a short depthwise ``Conv1d(3·D, 3·D, 3, padding=2,
groups=3·D)`` cut to ``[..., :l]``; ``x0, x1, v = uc.split(d_model, dim=1)``; ``v = v * x1``; the long filter
``k`` ``(D, L)`` (here a learnt table, where safari's is an implicit MLP of positions); ``fftconv``:
``fft_size = 2 * seqlen``, ``k_f = rfft(k, n=fft_size) / fft_size``, ``u_f = rfft(u, n=fft_size)``, ``y =
irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]`` (causal: zero-padded to 2·L, no wrap), ``y + u *
D``; ``y = y * x0``; back ``b d l -> b l d``; ``out_proj``.

Bugs (argument): ``fft-size-seqlen``: ``fft_size = seqlen`` (a circular convolution: the last tokens wrap
round into the first: the natural slip that the 2·L
padding exists to prevent); ``short-conv-not-cut``: the short conv's output
cut ``[..., -l:]`` (its last ``l`` steps: each token sees two later ones)."""

import sys

import torch
from torch import nn


def fftconv(u, k, D, bug=""):                                                      # u (B, D, L), k (D, L)
    seqlen = u.shape[-1]
    fft_size = seqlen if bug == "fft-size-seqlen" else 2 * seqlen
    k_f = torch.fft.rfft(k, n=fft_size) / fft_size
    u_f = torch.fft.rfft(u, n=fft_size)
    y = torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]      # (B, D, L)
    return y + u * D.unsqueeze(-1)


class HyenaOperator(nn.Module):
    def __init__(self, d_model, l_max, bug=""):
        super().__init__()
        self.d_model, self.bug = d_model, bug
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.short_filter = nn.Conv1d(3 * d_model, 3 * d_model, 3, padding=2, groups=3 * d_model)
        self.filter = nn.Parameter(torch.randn(d_model, l_max) * 0.1)
        self.bias = nn.Parameter(torch.randn(d_model))

    def forward(self, u):                                                          # (B, L, D)
        n = u.size(1)
        u = self.in_proj(u).transpose(1, 2)                                        # (B, 3D, L)
        uc = self.short_filter(u)
        uc = uc[..., -n:] if self.bug == "short-conv-not-cut" else uc[..., :n]
        x0, x1, v = uc.split(self.d_model, dim=1)                                  # (B, D, L) each
        v = v * x1
        v = fftconv(v, self.filter[:, :n], self.bias, self.bug)
        y = (v * x0).transpose(1, 2)                                               # (B, L, D)
        return self.out_proj(y)


BUGS = ("fft-size-seqlen", "short-conv-not-cut")
TWINS = ()
DIMS = ("B=2 T=6 D=32",)


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    return HyenaOperator(D, 16, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

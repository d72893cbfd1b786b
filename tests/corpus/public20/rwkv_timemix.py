"""BlinkDL/RWKV-LM, RWKV-v4/src/model.py (``RWKV_TimeMix``, v4 of 2022), with the CUDA WKV kernel written as
its parallel "GPT mode" form: ``time_shift = nn.ZeroPad2d((0, 0, 1, -1))`` (each token sees the one before),
``xk = x * time_mix_k + xx * (1 - time_mix_k)`` (likewise v, r); ``k, v, r = key(xk), value(xv),
receptance(xr)``; per channel a decay ``w = exp(time_decay)`` and a bonus ``u = time_first``:
``wkv_t = (Σ_{i<t} e^{-(t-1-i)w + k_i} v_i + e^{u + k_t} v_t) / (same without v_i)``; ``rwkv =
sigmoid(r) * wkv``; ``output(rwkv)``.

Bugs (argument): ``shift-from-the-future``: ``nn.ZeroPad2d((0, 0, -1, 1))`` (the pad's top and bottom swapped:
each token mixes in the next one: a natural slip of
the pad's argument order); ``decay-mask-transposed``: the
``[C, T, T]`` log-weight table built over ``i > t`` (the future keys) where ``i < t`` is meant."""

import sys

import torch
from torch import nn


class RWKV_TimeMix(nn.Module):
    def __init__(self, n_embd, bug=""):
        super().__init__()
        self.bug = bug
        self.time_decay = nn.Parameter(torch.randn(n_embd) * 0.1)
        self.time_first = nn.Parameter(torch.randn(n_embd) * 0.1)
        self.time_shift = nn.ZeroPad2d((0, 0, -1, 1) if bug == "shift-from-the-future" else (0, 0, 1, -1))
        self.time_mix_k = nn.Parameter(torch.rand(1, 1, n_embd))
        self.time_mix_v = nn.Parameter(torch.rand(1, 1, n_embd))
        self.time_mix_r = nn.Parameter(torch.rand(1, 1, n_embd))
        self.key = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(n_embd, n_embd, bias=False)
        self.receptance = nn.Linear(n_embd, n_embd, bias=False)
        self.output = nn.Linear(n_embd, n_embd, bias=False)

    def wkv(self, k, v):                                                          # (B, T, C) each
        T = k.size(1)
        w = torch.exp(self.time_decay)                                             # (C,)
        t = torch.arange(T)
        dist = (t[:, None] - 1 - t[None, :]).float()                               # (T, T): t - 1 - i
        past = t[None, :] > t[:, None] if self.bug == "decay-mask-transposed" else t[None, :] < t[:, None]
        logw = -dist[None] * w[:, None, None]                                      # (C, T, T)
        logw = logw.masked_fill(~past[None], float("-inf"))
        logw = torch.where(torch.eye(T, dtype=torch.bool)[None], self.time_first[:, None, None], logw)
        e = torch.exp(logw[None] + k.transpose(1, 2)[:, :, None, :])               # (B, C, T, T)
        num = (e * v.transpose(1, 2)[:, :, None, :]).sum(-1)                       # (B, C, T)
        den = e.sum(-1)                                                            # (B, C, T)
        return (num / den).transpose(1, 2)                                         # (B, T, C)

    def forward(self, x):                                                          # (B, T, C)
        xx = self.time_shift(x)
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xv = x * self.time_mix_v + xx * (1 - self.time_mix_v)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
        k, v, r = self.key(xk), self.value(xv), self.receptance(xr)
        rwkv = torch.sigmoid(r) * self.wkv(k, v)
        return self.output(rwkv)


BUGS = ("shift-from-the-future", "decay-mask-transposed")
TWINS = ()
DIMS = ("B=2 T=6 D=32",)


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    return RWKV_TimeMix(D, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

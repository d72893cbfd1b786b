"""mistralai/mistral-src, one_file_ref.py (v0.1, ``Attention`` and ``Transformer.forward``): a sliding-window
causal mask made ``torch.full((T, T), 1).tril(diagonal=0).triu(diagonal=-sliding_window)`` and turned
additive by ``torch.log`` (0 where seen, -inf where hidden), ``wq``/``wk``/``wv`` views ``(B, T, H, d)``,
grouped key/value heads by ``repeat_interleave(n_rep, dim=2)``, the heads moved by ``transpose(1, 2)``,
``scores += mask[None, None, ...]``, ``wo``.

Bugs (argument): ``tril-offset``: the triangle made ``tril(diagonal=1)`` (the offsets of ``tril`` and ``triu``
mixed up when the window was added, the off-by-one the window invites): each query sees the next token."""

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, d, h, h_kv):
        super().__init__()
        self.h, self.h_kv, self.hd = h, h_kv, d // h
        self.wq = nn.Linear(d, h * self.hd, bias=False)
        self.wk = nn.Linear(d, h_kv * self.hd, bias=False)
        self.wv = nn.Linear(d, h_kv * self.hd, bias=False)
        self.wo = nn.Linear(h * self.hd, d, bias=False)

    def forward(self, x, mask):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.h, self.hd)                         # (B, T, H, d)
        xk = xk.view(bsz, seqlen, self.h_kv, self.hd)                      # (B, T, H_kv, d)
        xv = xv.view(bsz, seqlen, self.h_kv, self.hd)
        key = torch.repeat_interleave(xk, repeats=self.h // self.h_kv, dim=2)   # (B, T, H, d)
        value = torch.repeat_interleave(xv, repeats=self.h // self.h_kv, dim=2)
        xq, key, value = xq.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)   # (B, H, T, d)
        scores = torch.matmul(xq, key.transpose(2, 3)) * self.hd**-0.5     # (B, H, T, T)
        scores = scores + mask[None, None, ...]
        scores = nn.functional.softmax(scores.float(), dim=-1)
        output = torch.matmul(scores, value)                               # (B, H, T, d)
        return self.wo(output.transpose(1, 2).contiguous().view(bsz, seqlen, -1))


class Transformer(nn.Module):
    def __init__(self, d, h, h_kv, bug="", sliding_window=3):
        super().__init__()
        self.attention, self.sliding_window, self.bug = Attention(d, h, h_kv), sliding_window, bug

    def forward(self, h):
        seqlen = h.shape[1]
        tensor = torch.full((seqlen, seqlen), fill_value=1, dtype=h.dtype)
        diagonal = 1 if self.bug == "tril-offset" else 0
        mask = torch.tril(tensor, diagonal=diagonal).to(h.dtype)           # (T, T)
        mask = torch.triu(mask, diagonal=-self.sliding_window)
        mask = torch.log(mask)                                             # 0 seen, -inf hidden
        return self.attention(h, mask)


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    return Transformer(D, H, H_kv, bug).eval(), (torch.randn(B, T, D),)


BUGS = ("tril-offset",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

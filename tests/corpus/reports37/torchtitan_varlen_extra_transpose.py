"""pytorch/torchtitan issue #2223 ("Incorrect transpose in Qwen3 varlen attention backend", closed; fixes
proposed in pull requests #2264 and #2265, "fix sdpa-varlen attention mismatch in qwen3"): the Qwen3
``Attention.forward`` transposed the inner attention's output back, ``output.transpose(1, 2)``, whichever backend
ran. For ``sdpa`` and ``flex`` that is right, their output is ``(bs, n_heads, seqlen, head_dim)``; the ``varlen``
wrapper already hands its output back token-major, so the shared tail transposed it once more, and the
``.view(bs, seqlen, -1)`` that follows hid the slip by reshaping the tensor back to the expected size (the
reporter: an extra transpose "masked by a subsequent ``.view()``"). The fix transposes only on the sdpa/flex paths.

The idiom (ported to torch): ``wq``/``wk``/``wv`` to ``(bs, seqlen, n_heads, head_dim)``, per-head ``RMSNorm`` on
queries and keys (Qwen3's qk-norm), a ``varlen`` inner attention that packs the batch into ``(bs * seqlen,
n_heads, head_dim)`` with ``cu_seqlens`` and runs causal attention document by document (every document here is
one whole row), then unpacks to ``(bs, seqlen, n_heads, head_dim)``; ``wo`` on the merged heads.

Bug (argument): ``extra-transpose``: the varlen path's token-major output transposed (1, 2) before the view."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("extra-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class VarlenAttentionWrapper(nn.Module):
    def forward(self, xq, xk, xv, cu_seqlens):
        bs, seqlen, n_heads, head_dim = xq.shape
        q = xq.reshape(bs * seqlen, n_heads, head_dim)                                 # (B*T, H, d)
        k = xk.reshape(bs * seqlen, n_heads, head_dim)                                 # (B*T, H, d)
        v = xv.reshape(bs * seqlen, n_heads, head_dim)                                 # (B*T, H, d)
        outs = []
        for i in range(cu_seqlens.shape[0] - 1):
            start, end = int(cu_seqlens[i]), int(cu_seqlens[i + 1])
            qi, ki, vi = (t[start:end].transpose(0, 1) for t in (q, k, v))             # (H, T, d)
            oi = F.scaled_dot_product_attention(qi, ki, vi, is_causal=True)            # (H, T, d)
            outs.append(oi.transpose(0, 1))                                             # (T, H, d)
        out = torch.cat(outs, dim=0)                                                    # (B*T, H, d)
        return out.view(bs, seqlen, n_heads, head_dim)                                  # (B, T, H, d)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, bug=""):
        super().__init__()
        self.bug, self.n_heads, self.head_dim = bug, n_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.q_norm = nn.RMSNorm(self.head_dim, eps=1e-6)
        self.k_norm = nn.RMSNorm(self.head_dim, eps=1e-6)
        self.inner_attention = VarlenAttentionWrapper()

    def forward(self, x, cu_seqlens):
        bs, seqlen, _ = x.shape
        xq = self.wq(x).view(bs, seqlen, -1, self.head_dim)                             # (B, T, H, d)
        xk = self.wk(x).view(bs, seqlen, -1, self.head_dim)                             # (B, T, H, d)
        xv = self.wv(x).view(bs, seqlen, -1, self.head_dim)                             # (B, T, H, d)
        xq, xk = self.q_norm(xq), self.k_norm(xk)
        output = self.inner_attention(xq, xk, xv, cu_seqlens)                           # (B, T, H, d)
        if self.bug == "extra-transpose":
            output = output.transpose(1, 2).contiguous()                                # (B, H, T, d)
        output = output.view(bs, seqlen, -1)                                            # (B, T, D)
        return self.wo(output)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    cu_seqlens = torch.arange(B + 1, dtype=torch.int32) * T                            # (B+1,)
    return Attention(D, H, bug).eval(), (torch.randn(B, T, D), cu_seqlens)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""AI-Hypercomputer/maxtext issue #3138 ("MLA with ``cudnn_flash_jax`` leads to double scaling", labelled
bug, closed): ``attention_mla.MLA`` scales its queries right after the projection (``query * softmax_scale``),
and the ``dot_product`` kernel then multiplies queries by keys unscaled; the ``cudnn_flash_jax`` kernel
hardcodes its own scale as well, so with it the scores were scaled twice (``d ** -1``, not ``d ** -0.5``),
"incorrect attention results that do not match ``attention=dot_product``".

maxtext is JAX; here its MLA in torch, in its terms: ``wq``, the keys and values through a low-rank latent
``wkv_a`` → ``kv_norm`` → ``wkv_b`` split into ``key``/``value``, ``query = query * softmax_scale`` after the
projection, then the attention op: ``dot_product`` (``einsum`` of the pre-scaled queries and the keys, a
causal mask, ``softmax``) or a fused kernel (torch's SDPA, which scales by ``d ** -0.5`` itself).

Bug (argument): ``fused-kernel-scales-again``: the fused kernel on the pre-scaled queries (the report). The
correct file runs ``dot_product``; ``fused-unscaled`` (a correct variant, the fix's other form: the fused
kernel on unscaled queries) is a twin of the correct file."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("fused-kernel-scales-again",)
TWINS = ("fused-unscaled",)
DIMS = ("B=2 T=6 D=32 H=4",)
KV_LORA_RANK = 16


class MLA(nn.Module):
    def __init__(self, emb_dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, emb_dim // num_heads, bug
        self.softmax_scale = self.head_dim ** -0.5
        self.wq = nn.Linear(emb_dim, emb_dim, bias=False)
        self.wkv_a = nn.Linear(emb_dim, KV_LORA_RANK, bias=False)
        self.kv_norm = nn.RMSNorm(KV_LORA_RANK)
        self.wkv_b = nn.Linear(KV_LORA_RANK, 2 * emb_dim, bias=False)
        self.out = nn.Linear(emb_dim, emb_dim, bias=False)

    def forward(self, inputs):
        b, t, _ = inputs.shape
        query = self.wq(inputs).view(b, t, self.num_heads, self.head_dim)               # (b, t, n, d)
        if self.bug != "fused-unscaled":
            query = query * self.softmax_scale                                          # [pre-scale]
        kv = self.wkv_b(self.kv_norm(self.wkv_a(inputs))).view(b, t, self.num_heads, 2 * self.head_dim)
        key, value = kv.split([self.head_dim, self.head_dim], dim=-1)                   # (b, t, n, d)
        if self.bug in ("fused-kernel-scales-again", "fused-unscaled"):
            q, k, v = (x.transpose(1, 2) for x in (query, key, value))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)   # [kernel]
        else:
            scores = torch.einsum("btnd,bsnd->bnts", query, key)                         # (b, n, t, s)
            causal = torch.ones(t, t, dtype=torch.bool).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
            out = torch.einsum("bnts,bsnd->btnd", scores.softmax(dim=-1), value)
        return self.out(out.reshape(b, t, -1))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MLA(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

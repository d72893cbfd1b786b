"""state-spaces/mamba pull request #462 ("repeat kv for GQA", merged; lchu-ibm: "It seems currently we are not
repeating kv when GQA is used. This PR fix this issue by adding kv repeat before passing kv to SDPA"): the
hybrid models' ``MHA`` block (``mamba_ssm/modules/mha.py``) projects ``num_heads_kv`` key/value heads but, on
its ``scaled_dot_product_attention`` path (no flash-attn kernel, no inference cache), handed the un-repeated
keys and values to SDPA next to ``num_heads`` query heads. With one key/value head (MQA) SDPA broadcasts it and
the result is right; with 1 < num_heads_kv < num_heads the shapes do not broadcast. The fix
``repeat_interleave``s k and v ``num_heads // num_heads_kv`` times along the head axis.

The idiom: a fused ``in_proj`` to ``(num_heads + 2 * num_heads_kv) * head_dim``, ``split`` into q and kv,
``rearrange(q, '... (h d) -> ... h d')``, ``rearrange(kv, '... (two hkv d) -> ... two hkv d', two=2)``,
``kv.unbind(dim=-3)``, SDPA on ``transpose(1, 2)`` with ``is_causal=True`` and ``scale=softmax_scale``,
``rearrange(context, '... h d -> ... (h d)')``, ``out_proj``. Here num_heads_kv = H / 2.

Bug (argument): ``kv-not-repeated``: k and v passed to SDPA with num_heads_kv heads (SDPA raises: the outcome
``raises`` is what a user sees already, recorded as first sight)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

BUGS = ("kv-not-repeated",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MHA(nn.Module):
    def __init__(self, embed_dim, num_heads, num_heads_kv=None, bug=""):
        super().__init__()
        self.num_heads = num_heads
        self.num_heads_kv = num_heads_kv if num_heads_kv is not None else num_heads
        self.head_dim = embed_dim // num_heads
        self.softmax_scale = self.head_dim ** -0.5
        self.bug = bug
        qkv_dim = self.head_dim * (self.num_heads + 2 * self.num_heads_kv)
        self.in_proj = nn.Linear(embed_dim, qkv_dim)
        self.out_proj = nn.Linear(self.head_dim * num_heads, embed_dim)

    def forward(self, x):
        qkv = self.in_proj(x)
        q, kv = qkv.split([self.num_heads * self.head_dim, 2 * self.num_heads_kv * self.head_dim], dim=-1)
        q = rearrange(q, "... (h d) -> ... h d", d=self.head_dim)
        kv = rearrange(kv, "... (two hkv d) -> ... two hkv d", two=2, d=self.head_dim)
        k, v = kv.unbind(dim=-3)
        if self.bug != "kv-not-repeated":
            k = torch.repeat_interleave(k, dim=2, repeats=self.num_heads // self.num_heads_kv)
            v = torch.repeat_interleave(v, dim=2, repeats=self.num_heads // self.num_heads_kv)
        context = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, scale=self.softmax_scale
        ).transpose(1, 2)
        context = rearrange(context, "... h d -> ... (h d)")
        return self.out_proj(context)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MHA(D, H, num_heads_kv=H // 2, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

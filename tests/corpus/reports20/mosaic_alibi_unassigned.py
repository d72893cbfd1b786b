"""mosaicml/examples pull request #247 ("Fix non assignment bug", merged; alextrott16: "Hot fixes issue in
Mosaic GPT in latest updates that doesn't update the attention bias. Fixes alibi."): after a refactor of
MosaicGPT's ``_attn_bias``, the ALiBi bias was computed and added out of place to the zero bias buffer, but
the sum was not assigned back, so the buffer the attention read stayed zeros and the model trained and ran
without any position information. The fix assigns the result (``attn_bias = attn_bias.add(alibi)``).

The idiom (MosaicGPT's ``torch`` attention, the later llm-foundry's ``scaled_multihead_dot_product_attention``):
a fused ``Wqkv``, ``qkv.chunk(3, dim=2)``, einops ``rearrange(q, 'b s (h d) -> b h s d')`` and ``'b s (h d) ->
b h d s'`` for the keys, a bias buffer ``zeros(1, H, 1, max_seq_len)`` built once, ALiBi slopes ``1 /
2 ** (arange(1, H + 1) * alibi_bias_max / H)`` times ``arange(1 - S, 1)``, the bias sliced ``[..., -s_k:]`` and
added to ``q @ k * softmax_scale``, a causal ``triu`` ``masked_fill`` with ``finfo.min``, softmax,
``rearrange(out, 'b h s d -> b s (h d)')``, ``out_proj``.

Bug (argument): ``bias-not-assigned``: ``attn_bias.add(alibi)`` with its result dropped."""

import math
import sys

import torch
from einops import rearrange
from torch import nn

BUGS = ("bias-not-assigned",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def alibi_bias(n_heads, seq_len, alibi_bias_max=8):
    bias = torch.arange(1 - seq_len, 1, dtype=torch.float32).view(1, 1, 1, seq_len)
    m = torch.arange(1, n_heads + 1, dtype=torch.float32) * (alibi_bias_max / n_heads)
    slopes = (1.0 / torch.pow(2, m)).view(1, n_heads, 1, 1)
    return bias * slopes                                                          # (1, H, 1, S)


def build_attn_bias(attn_bias, n_heads, seq_len, alibi=True, bug=""):
    if alibi:
        if bug == "bias-not-assigned":
            attn_bias.add(alibi_bias(n_heads, seq_len))                           # [bias]
        else:
            attn_bias = attn_bias.add(alibi_bias(n_heads, seq_len))
    return attn_bias


def scaled_multihead_dot_product_attention(query, key, value, n_heads, attn_bias=None):
    q = rearrange(query, "b s (h d) -> b h s d", h=n_heads)
    k = rearrange(key, "b s (h d) -> b h d s", h=n_heads)
    v = rearrange(value, "b s (h d) -> b h s d", h=n_heads)
    s_q, s_k = q.size(-2), k.size(-1)
    softmax_scale = 1 / math.sqrt(q.size(-1))
    attn_weight = q.matmul(k) * softmax_scale
    if attn_bias is not None:
        attn_weight = attn_weight + attn_bias[:, :, :, -s_k:]
    min_val = torch.finfo(q.dtype).min
    causal_mask = torch.ones(s_q, s_k, dtype=torch.bool).triu(1)
    attn_weight = attn_weight.masked_fill(causal_mask.view(1, 1, s_q, s_k), min_val)
    attn_weight = torch.softmax(attn_weight, dim=-1)
    out = attn_weight.matmul(v)
    return rearrange(out, "b h s d -> b s (h d)")


class MosaicGPTAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len=16, bug=""):
        super().__init__()
        self.n_heads, self.max_seq_len, self.bug = n_heads, max_seq_len, bug
        self.Wqkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.attn_bias = None

    def _attn_bias(self):
        if self.attn_bias is None:
            attn_bias = torch.zeros(1, self.n_heads, 1, self.max_seq_len)
            self.attn_bias = build_attn_bias(attn_bias, self.n_heads, self.max_seq_len, bug=self.bug)
        return self.attn_bias

    def forward(self, x):
        query, key, value = self.Wqkv(x).chunk(3, dim=2)
        context = scaled_multihead_dot_product_attention(query, key, value, self.n_heads, self._attn_bias())
        return self.out_proj(context)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MosaicGPTAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

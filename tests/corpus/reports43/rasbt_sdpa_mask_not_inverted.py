"""rasbt/LLMs-from-scratch issue #1061 ("Bug in Ch03 - Bonus02 - PyTorch's scaled dot product attention without
FlashAttention", closed; rasbt: "Good catch"): ``ch03/02_bonus_efficient-multihead-attention``'s
``MHAPyTorchSDPAWithoutFlash`` registers ``mask = torch.triu(torch.ones(context_length, context_length),
diagonal=1).bool()`` (``True`` above the diagonal, the future) and hands its ``[:num_tokens, :num_tokens]`` cut to
``nn.functional.scaled_dot_product_attention(..., attn_mask=attn_mask, is_causal=False)``; for that function a
boolean ``True`` means "takes part in attention", so each token attends only to the tokens after it ("I think we
need to use ``~attn_mask``"), and the last one to none.

The idiom (the notebook's ``MHAPyTorchSDPAWithoutFlash``): one fused ``qkv = nn.Linear(d_in, 3 * d_out)``,
``view(batch_size, num_tokens, 3, num_heads, head_dim)``, ``permute(2, 0, 3, 1, 4)``, ``queries, keys, values =
qkv``, the mask cut to the sequence (or to ``context_length`` when longer), SDPA with ``dropout_p`` only in training,
``context_vec.transpose(1, 2).contiguous().view(batch_size, num_tokens, d_out)``, ``proj``. A context of 8.

Bugs: ``mask-not-inverted``: the ``triu`` mask passed as it is (the report); ``merge-without-transpose``: the
SDPA output viewed to ``(batch_size, num_tokens, d_out)`` straight from ``(b, num_heads, num_tokens, head_dim)``."""

import sys

import torch
from torch import nn

BUGS = ("mask-not-inverted", "merge-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class MHAPyTorchSDPAWithoutFlash(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False, bug=""):
        super().__init__()
        assert d_out % num_heads == 0, "embed_dim is indivisible by num_heads"
        self.num_heads, self.context_length, self.bug = num_heads, context_length, bug
        self.head_dim = d_out // num_heads
        self.d_out = d_out
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.proj = nn.Linear(d_out, d_out)
        self.dropout = dropout
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

    def forward(self, x):
        batch_size, num_tokens, embed_dim = x.shape
        qkv = self.qkv(x)                                                               # (b, num_tokens, 3 * d_out)
        qkv = qkv.view(batch_size, num_tokens, 3, self.num_heads, self.head_dim)        # (b, T, 3, H, d)
        qkv = qkv.permute(2, 0, 3, 1, 4)                                                # (3, b, H, T, d)
        queries, keys, values = qkv
        use_dropout = 0. if not self.training else self.dropout
        if self.context_length >= num_tokens:
            attn_mask = self.mask[:num_tokens, :num_tokens]                             # (T, T)
        else:
            attn_mask = self.mask[:self.context_length, :self.context_length]
        if self.bug != "mask-not-inverted":
            attn_mask = ~attn_mask
        context_vec = nn.functional.scaled_dot_product_attention(
            queries, keys, values, attn_mask=attn_mask, dropout_p=use_dropout, is_causal=False)   # (b, H, T, d)
        if self.bug != "merge-without-transpose":
            context_vec = context_vec.transpose(1, 2)                                   # (b, T, H, d)
        context_vec = context_vec.contiguous().view(batch_size, num_tokens, self.d_out)   # (b, T, d_out)
        return self.proj(context_vec)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MHAPyTorchSDPAWithoutFlash(D, D, H, context_length=8, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""openai/glide-text2im, glide_text2im/unet.py (``AttentionBlock`` with ``encoder_channels``, ``QKVAttention``)
and glide_text2im/text2im_model.py (``Text2ImUNet.get_text_emb``: ``xf_out.permute(0, 2, 1)``): the UNet's
attention over a channels-first latent ``[B, C, Hp, Wp]``, flattened by ``self.norm(x).view(b, c, -1)``
(``normalization`` = ``GroupNorm32(32, C)``), a ``Conv1d(C, 3C, 1)`` ``qkv`` folded batch-major by
``qkv.reshape(bs * n_heads, ch * 3, length).split(ch, dim=1)``; the caption's tokens enter as extra keys and
values: the text transformer's output ``[B, S, xf_width]`` is turned channels-first (``permute(0, 2, 1)``),
``encoder_kv = Conv1d(xf_width, 2C, 1)``, ``reshape(bs * n_heads, ch * 2, -1).split(ch, dim=1)``, and
``k = cat([ek, k], dim=-1)``, ``v = cat([ev, v], dim=-1)`` (each pixel attends the caption and the image);
``einsum("bct,bcs->bts", q * scale, k * scale)``, ``scale = 1 / sqrt(sqrt(ch))``, ``softmax(dim=-1)``,
``einsum("bts,bcs->bct")``, ``reshape(bs, -1, length)``, ``proj_out`` and the residual.

Bugs: ``text-reshape-for-permute``: ``xf_out.reshape(B, xf_width, S)`` in place of ``permute(0, 2, 1)`` (the
channels-first layout made by a reshape: every "channel" of a text token is a run of features of several tokens);
``value-cat-order-swapped``: ``v = cat([v, ev], dim=-1)`` while the keys are ``cat([ek, k])`` (key ``s`` no longer
pairs with value ``s``: the first ``S`` keys, the caption's, fetch the first pixels' values); ``scale-full-width``:
``scale = 1 / sqrt(sqrt(width))`` with the fused ``3C`` width for the head width ``ch`` (the logits shrunk by
``sqrt(3·H)``: a temperature slip)."""

import math
import sys

import torch
from torch import nn


class GroupNorm32(nn.GroupNorm):
    def forward(self, x):
        return super().forward(x.float()).type(x.dtype)


class QKVAttention(nn.Module):
    def __init__(self, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.bug = n_heads, bug

    def forward(self, qkv, encoder_kv=None):
        bs, width, length = qkv.shape
        assert width % (3 * self.n_heads) == 0
        ch = width // (3 * self.n_heads)
        q, k, v = qkv.reshape(bs * self.n_heads, ch * 3, length).split(ch, dim=1)   # (B·H, ch, T) each
        if encoder_kv is not None:
            assert encoder_kv.shape[1] == self.n_heads * ch * 2
            ek, ev = encoder_kv.reshape(bs * self.n_heads, ch * 2, -1).split(ch, dim=1)   # (B·H, ch, S) each
            k = torch.cat([ek, k], dim=-1)                                          # (B·H, ch, S + T)
            if self.bug == "value-cat-order-swapped":
                v = torch.cat([v, ev], dim=-1)                                      # (B·H, ch, T + S)
            else:
                v = torch.cat([ev, v], dim=-1)                                      # (B·H, ch, S + T)
        if self.bug == "scale-full-width":
            scale = 1 / math.sqrt(math.sqrt(width))
        else:
            scale = 1 / math.sqrt(math.sqrt(ch))
        weight = torch.einsum("bct,bcs->bts", q * scale, k * scale)                  # (B·H, T, S + T)
        weight = torch.softmax(weight.float(), dim=-1).type(weight.dtype)
        a = torch.einsum("bts,bcs->bct", weight, v)                                  # (B·H, ch, T)
        return a.reshape(bs, -1, length)                                            # (B, C, T)


class AttentionBlock(nn.Module):
    def __init__(self, channels, num_heads, encoder_channels, bug=""):
        super().__init__()
        self.channels, self.num_heads = channels, num_heads
        self.norm = GroupNorm32(32, channels)
        self.qkv = nn.Conv1d(channels, channels * 3, 1)
        self.attention = QKVAttention(num_heads, bug)
        self.encoder_kv = nn.Conv1d(encoder_channels, channels * 2, 1)
        self.proj_out = nn.Conv1d(channels, channels, 1)

    def forward(self, x, encoder_out):
        b, c, *spatial = x.shape
        qkv = self.qkv(self.norm(x).view(b, c, -1))                                  # (B, 3C, Hp·Wp)
        encoder_out = self.encoder_kv(encoder_out)                                   # (B, 2C, S)
        h = self.attention(qkv, encoder_out)                                         # (B, C, Hp·Wp)
        h = self.proj_out(h)
        return x + h.reshape(b, c, *spatial)                                         # (B, C, Hp, Wp)


class Text2ImSketch(nn.Module):
    def __init__(self, channels, num_heads, xf_width=20, n_vocab=50, text_ctx=16, bug=""):
        super().__init__()
        self.bug = bug
        self.token_embedding = nn.Embedding(n_vocab, xf_width)
        self.positional_embedding = nn.Parameter(torch.randn(text_ctx, xf_width) * 0.02)
        self.final_ln = nn.LayerNorm(xf_width)
        self.input_blocks = nn.Conv2d(4, channels, 3, padding=1)
        self.attn = AttentionBlock(channels, num_heads, xf_width, bug)

    def get_text_emb(self, tokens):
        xf_in = self.token_embedding(tokens)                                         # (B, S, xf_width)
        xf_in = xf_in + self.positional_embedding[None, :tokens.shape[1]]
        xf_out = self.final_ln(xf_in)
        if self.bug == "text-reshape-for-permute":
            return xf_out.reshape(xf_out.shape[0], xf_out.shape[2], xf_out.shape[1])   # (B, xf_width, S)
        return xf_out.permute(0, 2, 1)                                               # (B, xf_width, S)

    def forward(self, x, tokens):
        xf_out = self.get_text_emb(tokens)                                           # (B, xf_width, S)
        h = self.input_blocks(x)                                                     # (B, C, Hp, Wp)
        return self.attn(h, xf_out)


BUGS = ("text-reshape-for-permute", "value-cat-order-swapped", "scale-full-width")
TWINS = ()
DIMS = ("B=2 S=5 D=32 H=4 Hp=3 Wp=7",)
EQUAL = {DIMS[0]: "B=4 S=4 D=32 H=4 Hp=2 Wp=2"}


def build(bug="", B=2, S=5, D=32, H=4, Hp=3, Wp=7):  # noqa: N803
    torch.manual_seed(0)
    tokens = torch.randint(1, 50, (B, S))
    return Text2ImSketch(D, H, bug=bug).eval(), (torch.randn(B, 4, Hp, Wp), tokens)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

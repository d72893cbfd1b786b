"""TransformerLensOrg/TransformerLens issue #1609 ("TransformerBridge ignores attention_mask when deriving
position_ids, so left-padded input silently returns wrong logits and loss", labelled bug, high priority;
fixed by PR #1610): given token ids and an ``attention_mask`` of a left-padded batch, GPT-2's learned
positions were read at ``arange(T)``, so a row with ``p`` pads had its first real token at position ``p``
instead of 0 ("Bridge drift 9.09" on gpt2 with one pad). The fix derives ``position_ids =
attention_mask.cumsum(-1) - 1`` with the pads set to 0, as ``HookedTransformer`` does.

TransformerLens's idiom: ``W_E[tokens]`` and ``W_pos[positions]``, attention written with ``einsum`` over
named letters (``batch pos d_model, head_index d_model d_head``), ``b_Q``/``b_K``/``b_V``, scores
``/ sqrt(d_head)``, a causal mask and the padding mask as ``-inf`` (``IGNORE``), ``softmax(dim=-1)``, ``z``,
``W_O`` summed over the heads, ``b_O``.

Bug (argument): ``positions-from-arange``."""

import math
import sys

import torch
from torch import nn

BUGS = ("positions-from-arange",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Embeds(nn.Module):
    def __init__(self, d_vocab, n_ctx, d_model):
        super().__init__()
        self.W_E = nn.Parameter(torch.randn(d_vocab, d_model) * 0.1)
        self.W_pos = nn.Parameter(torch.randn(n_ctx, d_model) * 0.1)


class Attention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        d_head = d_model // n_heads
        self.d_head = d_head
        self.W_Q, self.W_K, self.W_V = (nn.Parameter(torch.randn(n_heads, d_model, d_head) * 0.1) for _ in range(3))
        self.b_Q, self.b_K, self.b_V = (nn.Parameter(torch.zeros(n_heads, d_head)) for _ in range(3))
        self.W_O = nn.Parameter(torch.randn(n_heads, d_head, d_model) * 0.1)
        self.b_O = nn.Parameter(torch.zeros(d_model))

    def forward(self, x, attention_mask):
        q = torch.einsum("bpm,imh->bpih", x, self.W_Q) + self.b_Q                # batch pos head_index d_head
        k = torch.einsum("bpm,imh->bpih", x, self.W_K) + self.b_K
        v = torch.einsum("bpm,imh->bpih", x, self.W_V) + self.b_V
        scores = torch.einsum("bqih,bkih->biqk", q, k) / math.sqrt(self.d_head)  # batch head query_pos key_pos
        T = x.shape[1]
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        keep = causal[None, None] & attention_mask[:, None, None, :].bool()
        scores = scores.masked_fill(~keep, float("-inf"))
        pattern = scores.softmax(dim=-1)
        pattern = torch.where(torch.isnan(pattern), torch.zeros_like(pattern), pattern)
        z = torch.einsum("bkih,biqk->bqih", v, pattern)                         # batch query_pos head_index d_head
        return torch.einsum("bqih,ihm->bqm", z, self.W_O) + self.b_O


class Bridge(nn.Module):
    def __init__(self, d_model, n_heads, d_vocab=50, n_ctx=16, bug=""):
        super().__init__()
        self.embed = Embeds(d_vocab, n_ctx, d_model)
        self.attn = Attention(d_model, n_heads)
        self.bug = bug

    def forward(self, tokens, attention_mask):
        if self.bug == "positions-from-arange":
            position_ids = torch.arange(tokens.shape[1]).expand_as(tokens)      # [positions]
        else:
            position_ids = attention_mask.long().cumsum(-1) - 1                 # [positions]
            position_ids = position_ids.masked_fill(attention_mask == 0, 0)
        x = self.embed.W_E[tokens] + self.embed.W_pos[position_ids]             # (B, T, D)
        return self.attn(x, attention_mask)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    tokens = torch.randint(1, 50, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[-1, :2] = 0                                                  # the last row left-padded by 2
    tokens[-1, :2] = 0
    return Bridge(D, H, bug=bug).eval(), (tokens, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

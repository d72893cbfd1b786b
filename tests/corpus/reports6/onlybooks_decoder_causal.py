"""onlybooks/llm issue #4 ("2장 문의 드립니다."; the author, shangrilar: "말씀해주신대로 self_attn 메서드에서
is_causal=is_causal 을 추가해주는 게 맞습니다. … 크로스 어텐션 부분에서는 … is_causal 인자 값을 삭제하는 게
맞습니다."): chapter 2's ``TransformerDecoderLayer`` passed ``is_causal`` to the encoder-decoder attention
and not to the masked self-attention. The book's ``attention`` builds the causal mask from the two lengths,
``ones(query_length, key_length).tril()``: on the cross attention's ``(T, S)`` scores that is a causal mask
between target and *source* places (target token i sees source tokens 0..i only), and the target tokens of
the self-attention see the future. The fix: ``is_causal`` on the self-attention, none on the cross
attention.

The book's idiom: ``compute_attention(querys, keys, values, is_causal)`` (``scores = q @ kᵀ / sqrt(d)``,
``masked_fill(temp_mask == False, -inf)``, ``softmax(dim=-1)``), ``MultiheadAttention`` with ``linear_q``/
``linear_k``/``linear_v``, ``view(B, T, H, d).transpose(1, 2)``, ``transpose(1, 2).contiguous().view(B, T,
D)``, ``concat_linear``; a pre-norm decoder layer (``norm1``, self attention, ``norm2``, cross attention over
the encoder output ``(B, S, D)``).

Bugs (argument): ``causal-swapped``: the book's code (the causal mask on the cross attention, none on the
self-attention); ``cross-causal``: the causal mask on both.

Twin (argument): ``self-not-causal``: no causal mask on either. A decoder layer whose self-attention sees
every target token is an encoder layer with cross attention (a non-autoregressive decoder, a BERT-style
fusion layer): nothing torch records says this one is meant to generate."""

import math
import sys

import torch
from torch import nn

BUGS = ("causal-swapped", "cross-causal")
TWINS = ("self-not-causal",)
DIMS = ("B=2 T=6 S=8 D=32 H=4",)
EQUAL = {"B=2 T=6 S=8 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}


def compute_attention(querys, keys, values, is_causal=False):
    dim_k = querys.size(-1)
    scores = querys @ keys.transpose(-2, -1) / math.sqrt(dim_k)                  # (B, H, T, S)
    if is_causal:
        query_length, key_length = querys.size(2), keys.size(2)
        temp_mask = torch.ones(query_length, key_length, dtype=torch.bool).tril(diagonal=0)   # [mask]
        scores = scores.masked_fill(temp_mask == False, float("-inf"))           # noqa: E712 [fill]
    weights = torch.softmax(scores, dim=-1)
    return weights @ values                                                     # (B, H, T, d)


class MultiheadAttention(nn.Module):
    def __init__(self, token_embed_dim, d_model, n_head, is_causal=False):
        super().__init__()
        self.n_head, self.is_causal = n_head, is_causal
        self.linear_q = nn.Linear(token_embed_dim, d_model)
        self.linear_k = nn.Linear(token_embed_dim, d_model)
        self.linear_v = nn.Linear(token_embed_dim, d_model)
        self.concat_linear = nn.Linear(d_model, d_model)

    def forward(self, querys, keys, values):
        B, T, C = querys.size()
        querys = self.linear_q(querys).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)   # (B, H, T, d)
        keys = self.linear_k(keys).view(B, keys.size(1), self.n_head, C // self.n_head).transpose(1, 2)
        values = self.linear_v(values).view(B, values.size(1), self.n_head, C // self.n_head).transpose(1, 2)
        attention = compute_attention(querys, keys, values, self.is_causal)
        output = attention.transpose(1, 2).contiguous().view(B, T, C)           # (B, T, D)
        return self.concat_linear(output)


class TransformerDecoderLayer(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self_causal = bug in ("", "cross-causal")
        cross_causal = bug in ("causal-swapped", "cross-causal")
        self.self_attn = MultiheadAttention(d_model, d_model, nhead, is_causal=self_causal)
        self.multihead_attn = MultiheadAttention(d_model, d_model, nhead, is_causal=cross_causal)
        self.feed_forward = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.ReLU(), nn.Linear(2 * d_model, d_model))
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def forward(self, tgt, encoder_output):
        x = self.norm1(tgt)
        x = x + self.self_attn(x, x, x)
        x = self.norm2(x)
        x = x + self.multihead_attn(x, encoder_output, encoder_output)
        x = self.norm3(x)
        return x + self.feed_forward(x)


def build(bug="", B=2, T=6, S=8, D=32, H=4):
    torch.manual_seed(0)
    return TransformerDecoderLayer(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""ml-explore/mlx PR #3071 ("Fix ALiBi slopes for non-power-of-2 num_heads", merged; issue #343): the slopes
were the geometric series ``(2**8) ** (-arange(1, H + 1) / H)``, right only where H is a power of two; the
fix takes the paper's slopes for the nearest lower power of two and every other slope of the next (the
strided ``concat([slopes[1::2], slopes[::2]])[:H]`` of MPT's ``gen_slopes``).

The model (MPT's idiom, huggingface/transformers ``build_mpt_alibi_tensor``): the bias
``arange(1 - S, 1)`` over the keys only ``(1, 1, 1, S)`` (a per-query constant would cancel in the softmax)
times the slopes ``(1, H, 1, 1)``, added to the scores; a fused ``Wqkv``, ``chunk(3, dim=2)``, a causal mask by
``masked_fill``; H = 6 heads.

Twin (argument): ``slopes-geometric``: other numbers in a ``(1, H, 1, 1)`` table of the same shape, built from
the same sizes; no trace can tell a per-head temperature table from another."""

import math
import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("slopes-geometric",)
DIMS = ("B=2 T=5 D=48 H=6",)
EQUAL = {"B=2 T=5 D=48 H=6": "B=6 T=6 D=48 H=6"}


def gen_slopes(n_heads, alibi_bias_max=8, bug=""):
    if bug == "slopes-geometric":
        x = (2**alibi_bias_max) ** (1 / n_heads)
        return (x ** -torch.arange(1, n_heads + 1, dtype=torch.float32)).view(1, n_heads, 1, 1)
    _n_heads = 2 ** math.ceil(math.log2(n_heads))
    m = torch.arange(1, _n_heads + 1, dtype=torch.float32).mul(alibi_bias_max / _n_heads)
    slopes = 1.0 / torch.pow(2, m)
    if _n_heads != n_heads:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes.view(1, n_heads, 1, 1)                                          # (1, H, 1, 1)


def build_alibi_bias(n_heads, seq_len, bug=""):
    alibi_bias = torch.arange(1 - seq_len, 1, dtype=torch.int32).view(1, 1, 1, seq_len)  # (1, 1, 1, S)
    return alibi_bias * gen_slopes(n_heads, bug=bug)                              # (1, H, 1, S)


class MPTAttention(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.d_model, self.n_heads, self.bug = d_model, n_heads, bug
        self.head_dim = d_model // n_heads
        self.Wqkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, hidden_states):
        batch_size, seq_length = hidden_states.shape[:2]
        query, key, value = self.Wqkv(hidden_states).chunk(3, dim=2)              # (B, T, D) each
        query = query.reshape(batch_size, seq_length, self.n_heads, self.head_dim).transpose(1, 2)
        key = key.reshape(batch_size, seq_length, self.n_heads, self.head_dim).transpose(1, 2)
        value = value.reshape(batch_size, seq_length, self.n_heads, self.head_dim).transpose(1, 2)
        attention_scores = torch.matmul(query, key.transpose(-1, -2)) * self.head_dim**-0.5  # (B, H, T, T)
        attention_scores = attention_scores + build_alibi_bias(self.n_heads, seq_length, self.bug)
        causal = torch.ones(seq_length, seq_length, dtype=torch.bool).triu(1)    # (T, T) True above
        attention_scores = attention_scores.masked_fill(causal, torch.finfo(query.dtype).min)
        attn_weights = nn.functional.softmax(attention_scores.float(), dim=-1)
        context_states = torch.matmul(attn_weights, value)                        # (B, H, T, d)
        context_states = context_states.permute(0, 2, 1, 3).contiguous().view(batch_size, seq_length, -1)
        return self.out_proj(context_states)


def build(bug="", B=2, T=5, D=48, H=6):
    torch.manual_seed(0)
    return MPTAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""datawhalechina/tiny-universe issue #21 ("[Bug] Qwen-blog的小bug", closed; ThousandLayerCake: in the GQA section
``key = repeat_kv(key, 4).transpose(1, 2)`` "转置的位置写错了，应该先转置再传入 repeat_kv()" -- the transpose is in the
wrong place, the keys should be transposed before ``repeat_kv``; the author: "ok，感谢指正"): ``repeat_kv`` expects
``(bs, kv_heads, seq_len, head_dim)`` and repeats along its second axis; handed ``(bs, seq_len, kv_heads,
head_dim)`` it repeats the *tokens* instead of the heads.

The idiom: the blog's Qwen2 GQA walk-through (``q_proj``/``k_proj``/``v_proj``, ``view(bs, seq_len, heads,
head_dim)``, ``repeat_kv`` by ``expand``/``reshape`` as in transformers, ``transpose(1, 2)``, scores scaled by
``sqrt(head_dim)``, softmax, ``o_proj``), with one key/value head shared by every query head (multi-query, the
only grouping under which the blog's order runs at all: the repeated tokens broadcast over the heads).

Bug (which axis is repeated): ``repeat-before-transpose``: ``repeat_kv(key, n_rep).transpose(1, 2)``: each key
token is repeated ``n_rep`` times along the tokens, the keys and values stay one head."""

import math
import sys

import torch
from torch import nn

BUGS = ("repeat-before-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def repeat_kv(hidden_states, n_rep):
    """transformers' ``repeat_kv``: ``(batch, num_key_value_heads, seqlen, head_dim)`` -> ``(batch,
    num_attention_heads, seqlen, head_dim)``."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class GQAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_key_value_heads=1, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads, self.num_key_value_heads = num_heads, num_key_value_heads
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)

    def forward(self, x):
        bs, seq_len, _ = x.shape
        n_rep = self.num_heads // self.num_key_value_heads
        query = self.q_proj(x).view(bs, seq_len, self.num_heads, self.head_dim)
        key = self.k_proj(x).view(bs, seq_len, self.num_key_value_heads, self.head_dim)
        value = self.v_proj(x).view(bs, seq_len, self.num_key_value_heads, self.head_dim)
        query = query.transpose(1, 2)                                                   # (bs, head, seq_len, head_dim)
        if self.bug == "repeat-before-transpose":
            key = repeat_kv(key, n_rep).transpose(1, 2)
            value = repeat_kv(value, n_rep).transpose(1, 2)
        else:
            key = repeat_kv(key.transpose(1, 2), n_rep)
            value = repeat_kv(value.transpose(1, 2), n_rep)
        scores = torch.matmul(query, key.transpose(2, 3)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, value).transpose(1, 2).reshape(bs, seq_len, -1)
        return self.o_proj(out)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return GQAttention(D, H, num_key_value_heads=1, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

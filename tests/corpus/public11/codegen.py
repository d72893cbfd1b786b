"""huggingface/transformers, src/transformers/models/codegen/modeling_codegen.py (v4.3x, ``CodeGenAttention``):
one ``qkv_proj`` reshaped ``(B, T, mp_num, -1)`` and cut with ``torch.split(qkv_split, local_dim, dim=-1)``
into query, value, key *in that order*; ``_split_heads(x, n_head, dim_head, mp_num)`` reshapes each
``(B, T, mp_num, H / mp_num, d)`` then ``(B, T, H, d)``; GPT-J's interleaved rotary; the causal ``bias``
buffer and ``torch.where``; ``_merge_heads`` ``permute(0, 2, 1, 3)``.

Bugs (argument): ``merge-no-permute``: ``_merge_heads`` written ``tensor.reshape(B, T, H * d)`` straight from
``(B, H, T, d)`` (transformer-from-scratch PR #6's question, the merge without the permute).
Twins: ``split-qkv``: the split read in the order q, k, v (the natural slip the brief names). On random
weights this is the same model with its projection's columns relabelled: nothing torch records can tell it
from the q, v, k order; it is a bug only against CodeGen's checkpoints, so here it is a twin of the correct
file."""

import sys

import torch
from torch import nn


def rotate_every_two(x):
    x1, x2 = x[:, :, :, ::2], x[:, :, :, 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary_pos_emb(x, sincos):
    sin, cos = (t.repeat_interleave(2, dim=-1)[None, :, None, :] for t in sincos)   # (1, T, 1, d)
    return x * cos + rotate_every_two(x) * sin


class CodeGenAttention(nn.Module):
    def __init__(self, d, h, bug="", mp_num=2, max_positions=16):
        super().__init__()
        self.h, self.hd, self.bug, self.mp_num = h, d // h, bug, mp_num
        causal = torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool))
        self.register_buffer("causal_mask", causal.view(1, 1, max_positions, max_positions), persistent=False)
        self.qkv_proj = nn.Linear(d, 3 * d, bias=False)
        self.out_proj = nn.Linear(d, d, bias=False)

    def _split_heads(self, x):
        reshaped = x.reshape(x.shape[:-1] + (self.h // self.mp_num, self.hd))     # (B, T, mp, H/mp, d)
        return reshaped.reshape(x.shape[:-2] + (-1,) + reshaped.shape[-1:])       # (B, T, H, d)

    def _merge_heads(self, x):
        if self.bug == "merge-no-permute":
            return x.reshape(x.size(0), x.size(2), self.h * self.hd)              # bug: (B, H, T, d) read as (B, T, D)
        x = x.permute(0, 2, 1, 3).contiguous()                                    # (B, T, H, d)
        return x.view(x.size()[:-2] + (self.h * self.hd,))

    def forward(self, hidden_states):
        qkv = self.qkv_proj(hidden_states)                                        # (B, T, 3D)
        qkv_split = qkv.reshape(qkv.shape[:-1] + (self.mp_num, -1))               # (B, T, mp, 3D/mp)
        local_dim = self.hd * self.h // self.mp_num
        if self.bug == "split-qkv":
            query, key, value = torch.split(qkv_split, local_dim, dim=-1)
        else:
            query, value, key = torch.split(qkv_split, local_dim, dim=-1)
        query, key = self._split_heads(query), self._split_heads(key)
        value = self._split_heads(value).permute(0, 2, 1, 3)                      # (B, H, T, d)
        t = key.shape[1]
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.hd, 2) / self.hd))
        sinusoid = torch.einsum("i , j -> i j", torch.arange(t, dtype=torch.float), inv_freq)
        sincos = (torch.sin(sinusoid), torch.cos(sinusoid))                       # (T, d/2)
        key = apply_rotary_pos_emb(key, sincos).permute(0, 2, 1, 3)               # (B, H, T, d)
        query = apply_rotary_pos_emb(query, sincos).permute(0, 2, 1, 3)
        mask = self.causal_mask[:, :, :t, :t]
        w = torch.matmul(query, key.transpose(-1, -2)) / self.hd**0.5             # (B, H, T, T)
        w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min))
        w = nn.functional.softmax(w, dim=-1)
        return self.out_proj(self._merge_heads(torch.matmul(w, value)))


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return CodeGenAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


BUGS = ("merge-no-permute",)
TWINS = ("split-qkv",)
DIMS = ("B=2 T=6 D=64 H=4",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

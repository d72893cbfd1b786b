"""huggingface/transformers, src/transformers/models/llama/modeling_llama.py (``eager_attention_forward``:
``causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]``, added to the scores) fed the 4-D mask
``_prepare_4d_causal_attention_mask`` makes for a left-padded batch (transformers' batched generation pads
on the left): the causal triangle plus the padding, filled with ``torch.finfo(dtype).min``. The first
queries of a left-padded sequence have no key left (their own token is padding and every later one is
in the future): their scores are all the fill, and softmax spreads them evenly over every key, the later
ones too. transformers documents this and, on its SDPA path, unmasks such rows on purpose
(``AttentionMaskConverter._unmask_unattended``); their outputs are padding.

Bugs (argument): ``triangle-reversed``: the triangle hides the past instead of the future
(``torch.tril(..., diagonal=-1)``), so real queries see later tokens."""

import sys

import torch
from torch import nn

BUGS = ("triangle-reversed",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def repeat_kv(x, n_rep):
    b, h_kv, t, d = x.shape
    return x[:, :, None].expand(b, h_kv, n_rep, t, d).reshape(b, h_kv * n_rep, t, d)  # (B, H, T, d)


class LlamaAttention(nn.Module):
    def __init__(self, d, h, h_kv):
        super().__init__()
        self.h, self.h_kv, self.hd = h, h_kv, d // h
        self.q_proj, self.o_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, h_kv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, h_kv * self.hd, bias=False)

    def forward(self, x, attention_mask):
        input_shape = x.shape[:-1]
        hidden_shape = (*input_shape, -1, self.hd)
        q = self.q_proj(x).view(hidden_shape).transpose(1, 2)  # (B, H, T, d)
        k = self.k_proj(x).view(hidden_shape).transpose(1, 2)  # (B, H_kv, T, d)
        v = self.v_proj(x).view(hidden_shape).transpose(1, 2)  # (B, H_kv, T, d)
        k, v = repeat_kv(k, self.h // self.h_kv), repeat_kv(v, self.h // self.h_kv)  # (B, H, T, d)
        w = torch.matmul(q, k.transpose(2, 3)) * self.hd**-0.5  # (B, H, T, T)
        w = w + attention_mask[:, :, :, : k.shape[-2]]
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()  # (B, T, H, d)
        return self.o_proj(out.reshape(*input_shape, -1).contiguous())  # (B, T, D)


def left_padded_mask(B, T, bug=""):
    """``[B, 1, T, T]``: the causal triangle and the left padding (two tokens of sequence 0), at finfo.min."""
    low = torch.finfo(torch.float32).min
    keep = torch.ones(B, T)
    keep[0, :2] = 0
    full = torch.full((T, T), low)
    triangle = full.tril(-1) if bug == "triangle-reversed" else full.triu(1)  # (T, T)
    return (triangle[None, None] + (1.0 - keep)[:, None, None, :] * low).clamp(min=low)  # (B, 1, T, T)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return LlamaAttention(D, H, H_kv), (torch.randn(B, T, D), left_padded_mask(B, T, bug))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)

"""huggingface/transformers, src/transformers/models/gpt2/modeling_gpt2.py (v4.3x, ``GPT2Attention``) with
``pytorch_utils.Conv1D`` (weight ``(nx, nf)``, ``torch.addmm(bias, x.view(-1, nx), weight)``, viewed back):
``c_attn`` split ``split(embed_dim, dim=2)``, ``_split_heads`` (``view(new_shape).permute(0, 2, 1, 3)``),
``_attn`` with the causal ``bias`` buffer (``tril(ones(bool))``) sliced
``[:, :, key_length - query_length : key_length, :key_length]`` and ``torch.where(causal_mask, attn_weights,
mask_value)``, ``_merge_heads``, ``c_proj``.

Bugs (argument): ``split-no-permute``: ``_split_heads`` written ``tensor.view(B, H, T, d)`` with no permute
(the layout bug of FuxiCTR issue #30 and transformer-from-scratch PR #6, here in GPT-2's helper)."""

import sys

import torch
from torch import nn


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, d, h, bug="", max_positions=16):
        super().__init__()
        self.embed_dim, self.h, self.hd, self.bug = d, h, d // h, bug
        bias = torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool))
        self.register_buffer("bias", bias.view(1, 1, max_positions, max_positions), persistent=False)
        self.c_attn, self.c_proj = Conv1D(3 * d, d), Conv1D(d, d)

    def _split_heads(self, tensor):
        if self.bug == "split-no-permute":
            return tensor.view(tensor.size(0), self.h, tensor.size(1), self.hd)   # bug: no permute
        tensor = tensor.view(tensor.size()[:-1] + (self.h, self.hd))              # (B, T, H, d)
        return tensor.permute(0, 2, 1, 3)                                         # (B, H, T, d)

    def _merge_heads(self, tensor):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()                          # (B, T, H, d)
        return tensor.view(tensor.size()[:-2] + (self.h * self.hd,))

    def _attn(self, query, key, value):
        attn_weights = torch.matmul(query, key.transpose(-1, -2)) / torch.full(
            [], value.size(-1) ** 0.5, dtype=query.dtype)                         # (B, H, T, T)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]
        mask_value = torch.full([], torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        return torch.matmul(attn_weights, value)

    def forward(self, hidden_states):
        query, key, value = self.c_attn(hidden_states).split(self.embed_dim, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        return self.c_proj(self._merge_heads(self._attn(query, key, value)))


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return GPT2Attention(D, H, bug).eval(), (torch.randn(B, T, D),)


BUGS = ("split-no-permute",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers, src/transformers/models/gpt_neox/modeling_gpt_neox.py (v4.3x,
``GPTNeoXAttention``): a fused ``query_key_value`` viewed ``(B, T, H, 3·d)`` and cut on its last axis, rotary
on ``rotary_pct = 0.25`` of each head, the causal ``bias`` buffer (``torch.tril(ones)``, True where a key may
be seen) sliced ``[:, :, key_len - query_len : key_len, :key_len]`` and applied as
``torch.where(causal_mask, attn_scores, mask_value)`` with ``mask_value = finfo(dtype).min``, an additive
padding mask ``(B, 1, 1, T)``, heads merged by ``_merge_heads`` (``permute(0, 2, 1, 3)``).

Bugs (argument): ``where-reversed``: ``torch.where(causal_mask, mask_value, attn_scores)``, the keep-mask
taken for a hide-mask (the two branches of ``torch.where`` swapped, an easy slip of the idiom): each query
hides its past and itself and sees the future."""

import sys

import torch
from torch import nn

BUGS = ("where-reversed",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class GPTNeoXAttention(nn.Module):
    def __init__(self, d, h, bug="", max_positions=16):
        super().__init__()
        self.h, self.hd, self.bug = h, d // h, bug
        self.rotary_ndims = int(self.hd * 0.25)
        causal = torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool))
        self.register_buffer("bias", causal.view(1, 1, max_positions, max_positions), persistent=False)
        self.query_key_value, self.dense = nn.Linear(d, 3 * d), nn.Linear(d, d)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.rotary_ndims, 2).float() / self.rotary_ndims))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _rotary(self, x, t):
        freqs = torch.outer(torch.arange(t).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)  # (T, r)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]  # (1, 1, T, r)
        x_rot, x_pass = x[..., : self.rotary_ndims], x[..., self.rotary_ndims :]
        return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)  # (B, H, T, d)

    def forward(self, hidden_states, attention_mask):
        qkv = self.query_key_value(hidden_states)
        qkv = qkv.view(*qkv.size()[:-1], self.h, 3 * self.hd)  # (B, T, H, 3d)
        q = qkv[..., : self.hd].permute(0, 2, 1, 3)  # (B, H, T, d)
        k = qkv[..., self.hd : 2 * self.hd].permute(0, 2, 1, 3)  # (B, H, T, d)
        v = qkv[..., 2 * self.hd :].permute(0, 2, 1, 3)  # (B, H, T, d)
        q, k = self._rotary(q, q.shape[-2]), self._rotary(k, k.shape[-2])
        q_len, key_len = q.size(-2), k.size(-2)
        causal_mask = self.bias[:, :, key_len - q_len : key_len, :key_len]  # (1, 1, T, T)
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.hd**0.5  # (B, H, T, T)
        mask_value = torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype)
        if self.bug == "where-reversed":
            scores = torch.where(causal_mask, mask_value, scores)
        else:
            scores = torch.where(causal_mask, scores, mask_value)
        w = nn.functional.softmax(scores + attention_mask, dim=-1)
        out = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()  # (B, T, H, d)
        return self.dense(out.view(out.size(0), out.size(1), -1))  # (B, T, D)


def padding_mask(B, T):
    """``(B, 1, 1, T)``: the last two tokens of sequence 0 padded, at finfo.min."""
    keep = torch.ones(B, T)
    keep[0, T - 2 :] = 0
    return (1.0 - keep)[:, None, None, :] * torch.finfo(torch.float32).min


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return GPTNeoXAttention(D, H, bug), (torch.randn(B, T, D), padding_mask(B, T))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)

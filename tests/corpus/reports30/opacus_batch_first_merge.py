"""meta-pytorch/opacus pull request #825 ("Fix batch_first paths in DPMultiheadAttention", fixes issue #774):
besides the mask check of #774, the PR found that with ``batch_first=True`` the output reshape "permuted
nothing": ``DPMultiheadAttention`` viewed the ``(bsz * num_heads, tgt_len, head_dim)`` result of the second
``bmm`` straight as ``(bsz, tgt_len, embed_dim)``, "so head positions got spliced into time positions"
(``max|diff|`` against ``nn.MultiheadAttention`` about 0.96). The fix goes ``(B*H, L, D) -> (B, H, L, D) ->
(B, L, H, D) -> (B, L, E)`` by ``view``, ``transpose(1, 2)``, ``contiguous`` and ``view``.

The idiom (opacus' differentially private drop-in for ``nn.MultiheadAttention``): separate ``qlinear``,
``klinear``, ``vlinear`` (``nn.Linear`` so that per-sample gradients can be computed), the queries scaled by
``head_dim ** -0.5``, heads folded into the batch ``(bsz * num_heads, len, head_dim)`` as in torch's own
``multi_head_attention_forward``, ``bmm`` scores, a ``key_padding_mask`` applied on the
``(bsz, num_heads, tgt_len, src_len)`` view (``unsqueeze(1).unsqueeze(2)``, ``-inf``), ``softmax(dim=-1)``,
dropout, ``bmm`` with the values, the heads merged back and ``out_proj``; batch-first input, the second
sequence padded at its end.

Bug (merge): ``merge-without-transpose``: the ``(bsz * num_heads, tgt_len, head_dim)`` output viewed as
``(bsz, tgt_len, embed_dim)`` directly."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("merge-without-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class DPMultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, batch_first=True, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.batch_first, self.bug = embed_dim, num_heads, batch_first, bug
        self.head_dim = embed_dim // num_heads
        self.scaling = float(self.head_dim) ** -0.5
        self.qlinear = nn.Linear(embed_dim, embed_dim)
        self.klinear = nn.Linear(embed_dim, embed_dim)
        self.vlinear = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def _fold_heads(self, x, bsz, length):
        x = x.contiguous().view(bsz, length, self.num_heads, self.head_dim)   # (B, L, H, d_k)
        x = x.transpose(1, 2)                                                  # (B, H, L, d_k)
        return x.reshape(bsz * self.num_heads, length, self.head_dim)          # (B*H, L, d_k)

    def forward(self, query, key, value, key_padding_mask=None):
        bsz, tgt_len, embed_dim = query.size()
        src_len = key.size(1)
        q = self.qlinear(query) * self.scaling
        k = self.klinear(key)
        v = self.vlinear(value)
        q = self._fold_heads(q, bsz, tgt_len)                                  # (B*H, T, d_k)
        k = self._fold_heads(k, bsz, src_len)                                  # (B*H, S, d_k)
        v = self._fold_heads(v, bsz, src_len)                                  # (B*H, S, d_k)
        attn_output_weights = torch.bmm(q, k.transpose(1, 2))                  # (B*H, T, S)
        if key_padding_mask is not None:
            attn_output_weights = attn_output_weights.view(bsz, self.num_heads, tgt_len, src_len)
            attn_output_weights = attn_output_weights.masked_fill(
                key_padding_mask.unsqueeze(1).unsqueeze(2), float("-inf"))
            attn_output_weights = attn_output_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_output_weights = F.softmax(attn_output_weights, dim=-1)
        attn_output_weights = self.dropout(attn_output_weights)
        attn_output = torch.bmm(attn_output_weights, v)                        # (B*H, T, d_k)
        if self.bug == "merge-without-transpose":
            attn_output = attn_output.contiguous().view(bsz, tgt_len, self.embed_dim)
        else:
            attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim)  # (B, H, T, d_k)
            attn_output = attn_output.transpose(1, 2).contiguous()                        # (B, T, H, d_k)
            attn_output = attn_output.view(bsz, tgt_len, self.embed_dim)                  # (B, T, D)
        return self.out_proj(attn_output)


class EncoderLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.self_attn = DPMultiheadAttention(dim, heads, bug=bug)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, key_padding_mask):
        return self.norm(x + self.self_attn(x, x, x, key_padding_mask=key_padding_mask))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    lengths = torch.tensor([T] + [max(1, T - 2)] * (B - 1))
    key_padding_mask = torch.arange(T)[None, :] >= lengths[:, None]               # (B, T), True = padding
    return EncoderLayer(D, H, bug=bug).eval(), (torch.randn(B, T, D), key_padding_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

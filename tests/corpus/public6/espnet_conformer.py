"""espnet/espnet, espnet/nets/pytorch_backend/transformer/attention.py (``MultiHeadedAttention.forward_qkv``,
``forward_attention``, ``RelPositionMultiHeadedAttention.rel_shift``) and embedding.py
(``RelPositionalEncoding``; https://github.com/espnet/espnet): batch-first ``(B, T, D)``; heads by
``view(n_batch, -1, h, d_k).transpose(1, 2)``; a relative table ``(1, 2T - 1, D)`` sliced from the
centre of a positive/negative sinusoid table; ``matrix_ac`` with ``pos_bias_u``, ``matrix_bd`` with
``pos_bias_v`` and ``rel_shift`` (pad a zero column on the last axis, view ``(B, H, 2T, T)``, drop the
first row, keep ``T`` positions); the padding mask ``(B, 1, T)`` from the lengths, ``mask.unsqueeze(1)
.eq(0)`` filled with ``finfo.min`` before the softmax and with 0 after it.

Bugs (argument): ``mask-time1``: the mask made ``(B, T, 1)`` (``make_non_pad_mask(lengths).unsqueeze(-1)``
instead of ``unsqueeze(-2)``): the padded queries are masked, the padded keys still attended (the
key-padding axis mix-up); ``bias-on-tokens``: the per-head biases ``(H, d_k)`` added to the queries
``(B, H, T, d_k)`` without espnet's transpose pair: it lines the heads up with the tokens (it only runs
where T = H, so it is traced there: the reason espnet transposes ``q`` to ``(B, T, H, d_k)`` first)."""

import math
import sys

import torch
from torch import nn

BUGS = ("mask-time1", "bias-on-tokens")
DIMS = ("B=2 T=6 D=32 H=4", "B=2 T=4 D=32 H=4")


class RelPositionalEncoding(nn.Module):
    def __init__(self, d_model=32, max_len=16):
        super().__init__()
        self.d_model = d_model
        position = torch.arange(0, max_len, dtype=torch.float32).unsqueeze(1)  # (L, 1)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
        pe_positive = torch.zeros(max_len, d_model)
        pe_negative = torch.zeros(max_len, d_model)
        pe_positive[:, 0::2] = torch.sin(position * div_term)
        pe_positive[:, 1::2] = torch.cos(position * div_term)
        pe_negative[:, 0::2] = torch.sin(-1 * position * div_term)
        pe_negative[:, 1::2] = torch.cos(-1 * position * div_term)
        pe_positive = torch.flip(pe_positive, [0]).unsqueeze(0)  # (1, L, D)
        pe_negative = pe_negative[1:].unsqueeze(0)  # (1, L - 1, D)
        self.register_buffer("pe", torch.cat([pe_positive, pe_negative], dim=1))  # (1, 2L - 1, D)

    def forward(self, x):
        x = x * math.sqrt(self.d_model)
        center = self.pe.size(1) // 2
        pos_emb = self.pe[:, center - x.size(1) + 1 : center + x.size(1)]  # (1, 2T - 1, D)
        return x, pos_emb


class RelPositionMultiHeadedAttention(nn.Module):
    def __init__(self, n_head=4, n_feat=32, bug=""):
        super().__init__()
        self.d_k, self.h, self.bug = n_feat // n_head, n_head, bug
        self.linear_q, self.linear_k, self.linear_v = (nn.Linear(n_feat, n_feat) for _ in range(3))
        self.linear_out = nn.Linear(n_feat, n_feat)
        self.linear_pos = nn.Linear(n_feat, n_feat, bias=False)
        self.pos_bias_u = nn.Parameter(torch.randn(self.h, self.d_k) * 0.02)
        self.pos_bias_v = nn.Parameter(torch.randn(self.h, self.d_k) * 0.02)

    def forward_qkv(self, query, key, value):
        n_batch = query.size(0)
        q = self.linear_q(query).view(n_batch, -1, self.h, self.d_k)  # (B, T, H, d_k)
        k = self.linear_k(key).view(n_batch, -1, self.h, self.d_k)
        v = self.linear_v(value).view(n_batch, -1, self.h, self.d_k)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, d_k) each

    def forward_attention(self, value, scores, mask):
        n_batch = value.size(0)
        mask = mask.unsqueeze(1).eq(0)  # (B, 1, 1, T)
        min_value = torch.finfo(scores.dtype).min
        scores = scores.masked_fill(mask, min_value)
        attn = torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)  # (B, H, T, T)
        x = torch.matmul(attn, value)  # (B, H, T, d_k)
        x = x.transpose(1, 2).contiguous().view(n_batch, -1, self.h * self.d_k)  # (B, T, D)
        return self.linear_out(x)

    def rel_shift(self, x):
        zero_pad = torch.zeros((*x.size()[:3], 1), device=x.device, dtype=x.dtype)  # (B, H, T, 1)
        x_padded = torch.cat([zero_pad, x], dim=-1)  # (B, H, T, 2T)
        x_padded = x_padded.view(*x.size()[:2], x.size(3) + 1, x.size(2))  # (B, H, 2T, T)
        return x_padded[:, :, 1:].view_as(x)[:, :, :, : x.size(-1) // 2 + 1]  # (B, H, T, T)

    def forward(self, query, key, value, pos_emb, mask):
        q, k, v = self.forward_qkv(query, key, value)
        n_batch_pos = pos_emb.size(0)
        p = self.linear_pos(pos_emb).view(n_batch_pos, -1, self.h, self.d_k)
        p = p.transpose(1, 2)  # (1, H, 2T - 1, d_k)
        if self.bug == "bias-on-tokens":
            q_with_bias_u = q + self.pos_bias_u  # bug: (H, d_k) added along (T, d_k)
            q_with_bias_v = q + self.pos_bias_v
        else:
            q = q.transpose(1, 2)  # (B, T, H, d_k)
            q_with_bias_u = (q + self.pos_bias_u).transpose(1, 2)  # (B, H, T, d_k)
            q_with_bias_v = (q + self.pos_bias_v).transpose(1, 2)  # (B, H, T, d_k)
        matrix_ac = torch.matmul(q_with_bias_u, k.transpose(-2, -1))  # (B, H, T, T)
        matrix_bd = torch.matmul(q_with_bias_v, p.transpose(-2, -1))  # (B, H, T, 2T - 1)
        matrix_bd = self.rel_shift(matrix_bd)  # (B, H, T, T)
        scores = (matrix_ac + matrix_bd) / math.sqrt(self.d_k)
        return self.forward_attention(v, scores, mask)


class ConformerSelfAttention(nn.Module):
    def __init__(self, d_model=32, n_head=4, bug=""):
        super().__init__()
        self.bug = bug
        self.pos_enc = RelPositionalEncoding(d_model)
        self.attn = RelPositionMultiHeadedAttention(n_head, d_model, bug)

    def forward(self, xs, ilens):
        xs, pos_emb = self.pos_enc(xs)
        non_pad = torch.arange(xs.size(1))[None, :] < ilens[:, None]  # (B, T): make_non_pad_mask
        masks = non_pad.unsqueeze(-1) if self.bug == "mask-time1" else non_pad.unsqueeze(-2)  # (B, 1, T)
        return self.attn(xs, xs, xs, pos_emb, masks)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4': the second sequence is two frames shorter."""
    torch.manual_seed(0)
    ilens = torch.tensor([T] + [T - 2] * (B - 1))
    return ConformerSelfAttention(D, H, bug).eval(), (torch.randn(B, T, D), ilens)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""ZhengkunTian/OpenTransformer issue #25 ("Bug in relative positional encoding implementation", fixed by pull
request #28 "relative position shift bug fix"): the Conformer encoder's ``MultiHeadedSelfAttentionWithRelPos``
used Transformer-XL's ``_shift`` on a ``(batch, nheads, time, time)`` position score built from ``time``
positions ``time-1 .. 0``: XL's shift is only right under a lower-triangular (causal) mask, and the encoder
attends both ways, so the upper triangle of the shifted score reads the next query row's entries (query 0 at key
2 gets the score of query 1 at distance 3, as the issue's picture shows). The fix (ESPnet's later
``RelPositionMultiHeadedAttention``) encodes ``2*time-1`` positions ``time-1 .. -(time-1)`` and keeps the first
``time`` columns after the shift, so every (query, key) reads its own distance.

The idiom: one ``qvk_proj`` split with ``torch.split``, ``reshape(batch_size, -1, nheads, d_k)`` and
``transpose(1, 2)``, ``pos_proj`` without bias, the two learned biases ``posu``/``posv`` added to the query before
its transpose, ``matrix_ac + matrix_bd`` scaled by ``sqrt(d_k)``, ``compute_context`` with the
``masked_fill_(~mask, -inf)`` padding mask ``(batch, 1, time)`` unsqueezed at 1, softmax, ``transpose(1,
2).reshape(b, t, n * v)``, ``output_proj``; the sinusoidal positions made by a ``RelPositionalEncoding``.

Bug (positions): ``xl-shift-encoder``: ``time`` positions ``time-1 .. 0`` and XL's shift with no causal mask."""

import math
import sys

import torch
from torch import nn

BUGS = ("xl-shift-encoder",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class RelPositionalEncoding(nn.Module):
    def __init__(self, d_model, bug=""):
        super().__init__()
        self.d_model, self.bug = d_model, bug

    def forward(self, x):
        t = x.size(1)
        if self.bug == "xl-shift-encoder":
            positions = torch.arange(t - 1, -1, -1.0)                       # time-1 .. 0
        else:
            positions = torch.arange(t - 1, -t, -1.0)                       # time-1 .. -(time-1)
        div_term = torch.exp(torch.arange(0, self.d_model, 2, dtype=torch.float32)
                             * -(math.log(10000.0) / self.d_model))
        pe = torch.zeros(positions.size(0), self.d_model)
        pe[:, 0::2] = torch.sin(positions[:, None] * div_term)
        pe[:, 1::2] = torch.cos(positions[:, None] * div_term)
        return x * math.sqrt(self.d_model), pe.unsqueeze(0)


class MultiHeadedSelfAttentionWithRelPos(nn.Module):
    def __init__(self, n_heads, d_model, bug=""):
        super().__init__()
        self.bug = bug
        self.d_model, self.nheads, self.d_k = d_model, n_heads, d_model // n_heads
        self.qvk_proj = nn.Linear(d_model, d_model * 3)
        self.output_proj = nn.Linear(d_model, d_model)
        self.pos_proj = nn.Linear(d_model, d_model, bias=False)
        self.posu = nn.Parameter(torch.empty(n_heads, self.d_k))
        self.posv = nn.Parameter(torch.empty(n_heads, self.d_k))
        nn.init.xavier_normal_(self.posu)
        nn.init.xavier_normal_(self.posv)

    def _shift(self, x):
        b, nh, t, v = x.size()
        zero_pad = torch.zeros((b, nh, t, 1), dtype=x.dtype)
        x_padded = torch.cat([zero_pad, x], dim=-1)                         # (b, nh, t, v+1)
        x_padded = x_padded.view(b, nh, v + 1, t)
        if self.bug == "xl-shift-encoder":
            return x_padded[:, :, 1:].view_as(x)                            # (b, nh, t, t)
        return x_padded[:, :, 1:].view_as(x)[:, :, :, : v // 2 + 1]         # (b, nh, t, t)

    def compute_context(self, values, scores, mask):
        scores = scores.masked_fill(~mask, -float("inf"))
        weights = torch.softmax(scores, dim=-1)
        context = torch.matmul(weights, values)
        b, n, t, v = context.size()
        context = context.transpose(1, 2).reshape(b, t, n * v)
        return self.output_proj(context), weights

    def forward(self, x, mask, pos):
        x = self.qvk_proj(x)
        query, key, value = torch.split(x, self.d_model, dim=-1)
        batch_size = x.size(0)
        query = query.reshape(batch_size, -1, self.nheads, self.d_k)
        key = key.reshape(batch_size, -1, self.nheads, self.d_k).transpose(1, 2)
        value = value.reshape(batch_size, -1, self.nheads, self.d_k).transpose(1, 2)
        bpos = pos.size(0)
        pos = self.pos_proj(pos).reshape(bpos, -1, self.nheads, self.d_k).transpose(1, 2)
        query_with_bias_u = (query + self.posu).transpose(1, 2)
        query_with_bias_v = (query + self.posv).transpose(1, 2)
        matrix_ac = torch.matmul(query_with_bias_u, key.transpose(-2, -1))
        matrix_bd = self._shift(torch.matmul(query_with_bias_v, pos.transpose(-2, -1)))
        scores = (matrix_ac + matrix_bd) / math.sqrt(self.d_k)
        return self.compute_context(value, scores, mask.unsqueeze(1))


class ConformerAttentionBlock(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.pos_emb = RelPositionalEncoding(d_model, bug)
        self.norm = nn.LayerNorm(d_model)
        self.attn = MultiHeadedSelfAttentionWithRelPos(n_heads, d_model, bug)

    def forward(self, x, mask):
        x, pos = self.pos_emb(x)
        context, _ = self.attn(self.norm(x), mask, pos)
        return x + context


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    lengths = torch.full((B,), T)
    lengths[1:] = T - 2
    mask = (torch.arange(T)[None, :] < lengths[:, None]).unsqueeze(1)     # (batch, 1, time)
    return ConformerAttentionBlock(D, H, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""openspeech-team/openspeech pull request #182 ("Fix relative positional multi-head attention layer", merged;
fixes issue #176, "relative_multi_head_attention.py 구현 수정 제안"; the same fix went into sooftware/conformer
pull request #55): the Conformer's ``RelativeMultiHeadAttention`` divided its scores by ``math.sqrt(dim)``, the
model width, where the head width was meant (the PR's first item: "math.sqrt(dim) -> math.sqrt(d_head)"); for
a 144-wide, 4-head Conformer-S the scores were scaled by 1/12 instead of 1/6.

The idiom (openspeech's ``RelativeMultiHeadAttention`` as fixed, after fairseq's ESPnet-style layer): queries
viewed ``(batch, T, H, d_head)`` without a transpose, keys and values viewed and permuted to ``(batch, H, T,
d_head)``, a learned ``u_bias`` and ``v_bias`` of shape ``(H, d_head)`` added to the queries, content scores
``matmul((q + u).transpose(1, 2), k.transpose(2, 3))``, position scores against a projected relative
positional encoding of ``2T - 1`` positions, ``_relative_shift`` (a zero column, a view to ``(.., 2T, T)``, the
first row dropped, the first ``T`` relative offsets kept), ``(content + pos) / sqrt_dim``, the key padding mask
``masked_fill``-ed, ``softmax(-1)``, ``matmul`` with the values, ``transpose(1, 2)`` and ``view(batch, -1,
dim)``, ``out_proj``; the Conformer's attention module wraps it in a LayerNorm and a residual.

Bug (scale): ``scale-by-model-dim``: ``sqrt_dim = math.sqrt(dim)``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("scale-by-model-dim",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class RelPositionalEncoding(nn.Module):
    """Sinusoidal encodings of the relative offsets T-1, ..., 0, ..., -(T-1) (ESPnet's positive and negative
    halves, flipped and joined)."""

    def __init__(self, d_model, max_len=64):
        super().__init__()
        position = torch.arange(0, max_len, dtype=torch.float32).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
        pe_positive = torch.zeros(max_len, d_model)
        pe_negative = torch.zeros(max_len, d_model)
        pe_positive[:, 0::2] = torch.sin(position * div_term)
        pe_positive[:, 1::2] = torch.cos(position * div_term)
        pe_negative[:, 0::2] = torch.sin(-1 * position * div_term)
        pe_negative[:, 1::2] = torch.cos(-1 * position * div_term)
        pe_positive = torch.flip(pe_positive, [0]).unsqueeze(0)
        pe_negative = pe_negative[1:].unsqueeze(0)
        self.register_buffer("pe", torch.cat([pe_positive, pe_negative], dim=1))   # (1, 2 max_len - 1, D)
        self.max_len = max_len

    def forward(self, x):
        length = x.size(1)
        center = self.pe.size(1) // 2
        return self.pe[:, center - length + 1: center + length]                     # (1, 2T - 1, D)


class RelativeMultiHeadAttention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.dim, self.num_heads = dim, num_heads
        self.d_head = dim // num_heads
        self.sqrt_dim = math.sqrt(dim) if bug == "scale-by-model-dim" else math.sqrt(self.d_head)
        self.query_proj = nn.Linear(dim, dim)
        self.key_proj = nn.Linear(dim, dim)
        self.value_proj = nn.Linear(dim, dim)
        self.pos_proj = nn.Linear(dim, dim, bias=False)
        self.u_bias = nn.Parameter(torch.randn(num_heads, self.d_head) * 0.02)
        self.v_bias = nn.Parameter(torch.randn(num_heads, self.d_head) * 0.02)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, query, key, value, pos_embedding, mask=None):
        batch_size = value.size(0)
        query = self.query_proj(query).view(batch_size, -1, self.num_heads, self.d_head)          # (B, T, H, d_k)
        key = self.key_proj(key).view(batch_size, -1, self.num_heads, self.d_head).permute(0, 2, 1, 3)  # (B, H, T, d_k)
        value = self.value_proj(value).view(batch_size, -1, self.num_heads, self.d_head).permute(0, 2, 1, 3)
        pos_embedding = self.pos_proj(pos_embedding).view(1, -1, self.num_heads, self.d_head)     # (1, 2T-1, H, d_k)

        content_score = torch.matmul((query + self.u_bias).transpose(1, 2), key.transpose(2, 3))  # (B, H, T, T)
        pos_score = torch.matmul((query + self.v_bias).transpose(1, 2), pos_embedding.permute(0, 2, 3, 1))
        pos_score = self._relative_shift(pos_score)                                                 # (B, H, T, T)

        score = (content_score + pos_score) / self.sqrt_dim
        if mask is not None:
            score = score.masked_fill(mask.unsqueeze(1), -1e9)                                      # (B, 1, 1, T)
        attn = F.softmax(score, -1)
        context = torch.matmul(attn, value).transpose(1, 2)                                         # (B, T, H, d_k)
        context = context.contiguous().view(batch_size, -1, self.dim)                               # (B, T, D)
        return self.out_proj(context)

    def _relative_shift(self, pos_score):
        batch_size, num_heads, seq_length1, seq_length2 = pos_score.size()                         # (B, H, T, 2T-1)
        zeros = pos_score.new_zeros(batch_size, num_heads, seq_length1, 1)
        padded_pos_score = torch.cat([zeros, pos_score], dim=-1)                                    # (B, H, T, 2T)
        padded_pos_score = padded_pos_score.view(batch_size, num_heads, seq_length2 + 1, seq_length1)  # (B, H, 2T, T)
        return padded_pos_score[:, :, 1:].view_as(pos_score)[:, :, :, : seq_length2 // 2 + 1]     # (B, H, T, T)


class MultiHeadedSelfAttentionModule(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.positional_encoding = RelPositionalEncoding(dim)
        self.layer_norm = nn.LayerNorm(dim)
        self.attention = RelativeMultiHeadAttention(dim, num_heads, bug=bug)

    def forward(self, inputs, lengths):
        batch_size, seq_length, _ = inputs.size()
        pos_embedding = self.positional_encoding(inputs)
        mask = (torch.arange(seq_length).unsqueeze(0) >= lengths.unsqueeze(1)).unsqueeze(1)        # (B, 1, T)
        x = self.layer_norm(inputs)
        return inputs + self.attention(x, x, x, pos_embedding=pos_embedding, mask=mask)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    lengths = torch.tensor([T] + [max(1, T - 2)] * (B - 1))
    return MultiHeadedSelfAttentionModule(D, H, bug=bug).eval(), (torch.randn(B, T, D), lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

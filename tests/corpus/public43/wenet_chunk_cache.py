"""wenet-e2e/wenet, wenet/transformer/attention.py (``MultiHeadedAttention.forward_qkv``, ``forward_attention`` and
``forward`` with ``cache``, v2.x; the cache lines as in ``MultiHeadedAttention.forward`` of the same file, and as
copied into FunAudioLLM/CosyVoice): streaming speech-encoder attention over chunks of frames. ``linear_q(query)
.view(n_batch, -1, h, d_k).transpose(1, 2)`` ``(B, H, T, d_k)`` for q, k and v; the cache ``(B, H, cache_t, 2·d_k)``
split by ``torch.split(cache, cache.size(-1) // 2, dim=-1)`` into the cached keys and values, joined before the
chunk's on the time axis (``torch.cat([key_cache, k], dim=2)``); ``new_cache = torch.cat((k, v), dim=-1)``;
``matmul(q, k.transpose(-2, -1)) / sqrt(d_k)``, the mask ``(B, 1, time2)`` as ``mask.unsqueeze(1).eq(0)``,
``masked_fill(-inf)``, ``softmax(dim=-1)``, ``masked_fill(0.0)``, ``matmul`` with v, and ``x.transpose(1, 2)
.contiguous().view(n_batch, -1, h * d_k)``, ``linear_out``. Two chunks of T frames: the first with an empty
cache ``(0, 0, 0, 0)``, the second with the first's ``new_cache``.

Bugs: ``merge-without-transpose``: ``x.contiguous().view(n_batch, -1, h * d_k)`` (the ``transpose(1, 2)`` dropped,
heads folded into the frames); ``cache-kv-interleaved``: the cache written ``torch.stack((k, v), dim=-1)
.flatten(-2)`` (keys and values interleaved feature by feature, as an export rewrite might pack it) while the
reader still splits it in halves: the second chunk's cached "keys" are half key features, half value features."""

import math
import sys

import torch
from torch import nn

#: wenet's default ``cache: torch.Tensor = torch.zeros((0, 0, 0, 0))``: the first chunk's empty cache
NO_CACHE = torch.zeros((0, 0, 0, 0))


class MultiHeadedAttention(nn.Module):
    def __init__(self, n_head, n_feat, bug=""):
        super().__init__()
        self.d_k, self.h, self.bug = n_feat // n_head, n_head, bug
        self.linear_q = nn.Linear(n_feat, n_feat)
        self.linear_k = nn.Linear(n_feat, n_feat)
        self.linear_v = nn.Linear(n_feat, n_feat)
        self.linear_out = nn.Linear(n_feat, n_feat)

    def forward_qkv(self, query, key, value):
        n_batch = query.size(0)
        q = self.linear_q(query).view(n_batch, -1, self.h, self.d_k)                # (B, T, H, d_k)
        k = self.linear_k(key).view(n_batch, -1, self.h, self.d_k)                  # (B, T, H, d_k)
        v = self.linear_v(value).view(n_batch, -1, self.h, self.d_k)                # (B, T, H, d_k)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)              # (B, H, T, d_k)

    def forward_attention(self, value, scores, mask):
        n_batch = value.size(0)
        mask = mask.unsqueeze(1).eq(0)                                              # (B, 1, 1, time2)
        scores = scores.masked_fill(mask, -float("inf"))
        attn = torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)                 # (B, H, T, time2)
        x = torch.matmul(attn, value)                                               # (B, H, T, d_k)
        if self.bug == "merge-without-transpose":
            x = x.contiguous().view(n_batch, -1, self.h * self.d_k)                 # (B, T, D) [bug-merge]
        else:
            x = x.transpose(1, 2).contiguous().view(n_batch, -1, self.h * self.d_k)  # (B, T, D) [wenet-merge]
        return self.linear_out(x)

    def forward(self, query, key, value, mask, cache=NO_CACHE):
        q, k, v = self.forward_qkv(query, key, value)
        if cache.size(0) > 0:
            key_cache, value_cache = torch.split(cache, cache.size(-1) // 2, dim=-1)  # (B, H, cache_t, d_k)
            k = torch.cat([key_cache, k], dim=2)                                    # (B, H, cache_t+T, d_k) [wenet-k]
            v = torch.cat([value_cache, v], dim=2)                                  # (B, H, cache_t+T, d_k)
        if self.bug == "cache-kv-interleaved":
            new_cache = torch.stack((k, v), dim=-1).flatten(-2)                     # (B, H, time2, 2*d_k) [bug-cache]
        else:
            new_cache = torch.cat((k, v), dim=-1)                                   # (B, H, time2, 2*d_k)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)         # (B, H, T, time2)
        return self.forward_attention(v, scores, mask), new_cache


class ChunkEncoder(nn.Module):
    def __init__(self, d_model, n_head, bug=""):
        super().__init__()
        self.self_attn = MultiHeadedAttention(n_head, d_model, bug)

    def forward(self, chunk1, chunk2):                                              # (B, T, D) each
        n_batch, chunk_size, _ = chunk1.shape
        mask = torch.ones(n_batch, 1, chunk_size, dtype=torch.bool)                 # (B, 1, T)
        out1, cache = self.self_attn(chunk1, chunk1, chunk1, mask)
        mask = torch.ones(n_batch, 1, cache.size(2) + chunk_size, dtype=torch.bool)  # (B, 1, cache_t+T)
        out2, _ = self.self_attn(chunk2, chunk2, chunk2, mask, cache)
        return torch.cat([out1, out2], dim=1)                                       # (B, 2T, D)


BUGS = ("merge-without-transpose", "cache-kv-interleaved")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return ChunkEncoder(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, T, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""Greedy decoding with a key/value cache (torch only): a prefill over the prompt, then one-token steps
that append to the cache, GPT-2's legacy tuple cache style. Used by the README."""

import torch
from torch import nn


class CachedAttention(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, cache=None):
        B, T, D = x.shape                                                    # (B, T, D)
        q, k, v = self.qkv(x).split(D, dim=2)                                # (B, T, D) each
        q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2)  # (B, H, T, d_k)
                   for t in (q, k, v))
        if cache is not None:
            k = torch.cat([cache[0], k], dim=2)                              # (B, H, T+1, d_k)
            v = torch.cat([cache[1], v], dim=2)                              # (B, H, T+1, d_k)
        weights = (q @ k.transpose(-2, -1) / (D // self.heads) ** 0.5).softmax(-1)  # (B, H, T, T+1)
        out = (weights @ v).transpose(1, 2).reshape(B, T, D)                # (B, T, D)
        return self.proj(out), (k, v)


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.attn = CachedAttention(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids, cache=None):
        x = self.embed(ids)                                                  # (B, T, D)
        y, cache = self.attn(x, cache)
        return self.head(x + y), cache                                       # (B, T, vocab)


torch.manual_seed(0)
model = TinyLM().eval()
ids = torch.randint(0, 50, (2, 6))                                           # (B, T)
with torch.no_grad():
    logits, cache = model(ids)                                               # the prefill
    for _ in range(2):                                                       # two decode steps
        step = logits[:, -1:].argmax(-1)                                     # (B, T[-1:])
        logits, cache = model(step, cache)

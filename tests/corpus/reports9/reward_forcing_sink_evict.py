"""JaydenLyh/Reward-Forcing issue #5 ("Misalignment in attention sink updating", acknowledged: "Thanks for the
catch! ... We'll push a fix"): the rolling KV cache with attention sinks chose the tokens to evict with
``evicted_start = total_sink_tokens + num_rolled_tokens`` and ``evicted_end = evicted_start +
num_evicted_tokens``, an offset past the rolled tokens, so the cache dropped its newest frames instead of the
oldest ones after the sinks.

The idiom (StreamingLLM's ``StartRecentKVCache``): keys and values ``(B, H, L, d)``; when a new step would
overflow the cache, keep the ``S`` sink tokens and the most recent ones, ``cat([k[:, :, :S], k[:, :, S + n:]],
dim=2)``, then append the new step's keys and attend (one query, no mask: every cached token is in the past).
Here the cache holds T tokens of a prefill, ``S = 1`` sink, ``n = 2`` evicted, the new step is one token.

Twin (argument): ``evict-newest``: the kept window is ``k[:, :, S:L - n]`` (the newest n dropped). A twin, not
a bug the trace could show: the sinks and that window are adjacent, so their ``cat`` holds the cache's first
``L - n`` entries in order, what a correct rollback records (speculative decoding truncating the cache to its
accepted tokens before the next one is appended); only the eviction policy, not torch, says the newest were
meant to stay."""

import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("evict-newest",)
DIMS = ("B=2 T=6 D=32 H=4",)


class SinkCache:
    def __init__(self, sink=1, capacity=5, bug=""):
        self.sink, self.capacity, self.bug = sink, capacity, bug

    def evict(self, k, v, incoming):
        length = k.shape[2]
        n = length + incoming - self.capacity
        if n <= 0:
            return k, v
        s = self.sink
        if self.bug == "evict-newest":
            keep = lambda t: torch.cat([t[:, :, :s], t[:, :, s:length - n]], dim=2)    # noqa: E731
        else:
            keep = lambda t: torch.cat([t[:, :, :s], t[:, :, s + n:]], dim=2)         # noqa: E731
        return keep(k), keep(v)                                                         # (B, H, C - 1, d)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.to_q, self.to_k, self.to_v, self.to_out = (nn.Linear(dim, dim) for _ in range(4))

    def heads_of(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)                  # (B, H, T, d)

    def forward(self, x, past_k, past_v, cache):
        q, k, v = self.heads_of(self.to_q(x)), self.heads_of(self.to_k(x)), self.heads_of(self.to_v(x))
        past_k, past_v = cache.evict(past_k, past_v, x.shape[1])
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)             # (B, H, C, d)
        w = (q @ k.transpose(-1, -2)) * self.head_dim ** -0.5                          # (B, H, 1, C)
        out = w.softmax(dim=-1) @ v                                                     # (B, H, 1, d)
        b, _, t, _ = out.shape
        return self.to_out(out.transpose(1, 2).reshape(b, t, -1)), (k, v)


class StreamingStep(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.attn, self.bug = Attention(dim, heads), bug

    def forward(self, prompt, token):
        t = prompt.shape[1]
        cache = SinkCache(sink=1, capacity=t - 1, bug=self.bug)
        k = self.attn.heads_of(self.attn.to_k(prompt))                                  # (B, H, T, d)
        v = self.attn.heads_of(self.attn.to_v(prompt))
        out, _ = self.attn(token, k, v, cache)
        return out                                                                      # (B, 1, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return StreamingStep(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

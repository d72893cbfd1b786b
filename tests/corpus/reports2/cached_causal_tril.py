"""tinygrad/tinygrad PR #15949 ("ONNX Attention is_causal mask ignores past_key/past_value length") and
hyprstream/hyprstream PR #1521 (the same slip in its llama and qwen runtimes; meta-llama/llama PR #900 for
issue #899 is its loud form, a ``(T, T)`` mask that does not fit the ``(T, P + T)`` scores): with a KV cache
of P past tokens a chunk of T new queries is scored against P + T keys, and the causal mask was built
``ones(T, P + T).tril()``: query i saw keys 0..i, the whole past hidden and the chunk's own later tokens
half-seen; the fix offsets the diagonal, ``tril(P)`` (query i sees keys 0..P + i).

At a decoding step (one query, P + 1 keys) the unshifted ``tril`` keeps key 0 alone. The model (llama's
idiom: ``wq``/``wk``/``wv``/``wo``, ``view(B, T, H, d)``, the cache concatenated on the token axis,
``transpose(1, 2)``, scores ``q @ k^T / sqrt(d)``, ``masked_fill(~mask, -inf)``, ``softmax(dim=-1)``) runs a
prefill of T tokens, then one decoding step against the cache.

Bug (argument): ``tril-no-offset``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("tril-no-offset",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.head_dim, self.bug = n_heads, dim // n_heads, bug
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x, cache=None):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)        # (B, T, H, d)
        xk = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        if cache is not None:
            xk = torch.cat([cache[0], xk], dim=1)                               # (B, P+T, H, d)
            xv = torch.cat([cache[1], xv], dim=1)
        new_cache = (xk, xv)
        total = xk.shape[1]
        offset = 0 if self.bug == "tril-no-offset" else total - seqlen
        mask = torch.ones(seqlen, total, dtype=torch.bool).tril(offset)          # (T, P+T)
        q, k, v = xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2)   # (B, H, *, d)
        scores = q @ k.transpose(2, 3) / math.sqrt(self.head_dim)                # (B, H, T, P+T)
        scores = scores.masked_fill(~mask, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v                                      # (B, H, T, d)
        out = out.transpose(1, 2).contiguous().view(bsz, seqlen, -1)             # (B, T, D)
        return self.wo(out), new_cache


class Decoder(nn.Module):
    def __init__(self, dim, n_heads, bug=""):
        super().__init__()
        self.attn = Attention(dim, n_heads, bug)

    def forward(self, prompt, step):
        _, cache = self.attn(prompt)                                             # prefill: T tokens
        out, _ = self.attn(step, cache)                                          # one more token
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Decoder(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

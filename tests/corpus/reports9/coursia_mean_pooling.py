"""jsboige/CoursIA issue #15045, fixed by PR #15074 ("mean-pooling masquée par attention_mask", merged): the
embeddings notebook tokenised a batch with ``padding=True`` and pooled ``last_hidden_state.mean(dim=1)``
without the ``attention_mask``: the padding rows of the shorter sentences entered the mean, so a sentence's
embedding depended on the longest sentence of its batch. The fix (sentence-transformers' pooling):
``(h * m).sum(1) / m.sum(1)`` with ``m = attention_mask.unsqueeze(-1)``.

The idiom: a BERT-style encoder layer (``view(B, T, H, d).permute(0, 2, 1, 3)``, the additive padding mask
``(1 - mask[:, None, None, :]) * finfo.min`` on the keys, ``softmax(-1)``, ``LayerNorm``) over a right-padded
batch whose rows have 2 and 0 padding tokens, then mean pooling to one embedding per sentence.

Bug (argument): ``mean-over-padding``: ``h.mean(dim=1)``, the mask unused."""

import sys

import torch
from torch import nn

BUGS = ("mean-over-padding",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class EncoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.query, self.key, self.value, self.dense = (nn.Linear(dim, dim) for _ in range(4))
        self.norm = nn.LayerNorm(dim)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).permute(0, 2, 1, 3)              # (B, H, T, d)

    def forward(self, hidden, attention_mask):
        q, k, v = self.split(self.query(hidden)), self.split(self.key(hidden)), self.split(self.value(hidden))
        scores = q @ k.transpose(-1, -2) / self.head_dim ** 0.5                         # (B, H, T, T)
        extended = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(scores.dtype).min
        probs = (scores + extended).softmax(dim=-1)
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(hidden.shape)                     # (B, T, D)
        return self.norm(hidden + self.dense(ctx))


class SentenceEncoder(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.layer, self.bug = EncoderLayer(dim, heads), bug

    def forward(self, embeddings, attention_mask):
        h = self.layer(embeddings, attention_mask)                                      # (B, T, D)
        if self.bug == "mean-over-padding":
            return h.mean(dim=1)                                                        # (B, D)
        m = attention_mask.unsqueeze(-1).to(h.dtype)                                    # (B, T, 1)
        return (h * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)                        # (B, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    lengths = torch.tensor([T - 2, T] * B)[:B]
    attention_mask = (torch.arange(T)[None, :] < lengths[:, None]).long()               # (B, T): 1 = token
    return SentenceEncoder(D, H, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

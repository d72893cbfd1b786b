"""tensorflow/tensorflow issue #39635 ("Bug in tf.keras bidirectional LSTM when time_major is true"): the
``Bidirectional`` wrapper realigns its backward layer's output with ``K.reverse(y_rev, 1)``, axis 1 written
for batch-major sequences; with ``time_major=True`` the output is ``(T, B, D)`` and axis 1 is the batch, so the
backward outputs were reversed over the batch (each example given another example's backward states, still in
reversed time) before the concatenation. The fix reverses along the time axis, 0 when time-major.

Written here in torch for an attention layer (the wrapper is the same for any sequence layer that reads
``go_backwards``): a causal self-attention in the time-major layout of ``nn.MultiheadAttention``
(``(T, B, D)``: ``in_proj`` split into q, k, v, ``view(T, B * H, d).transpose(0, 1)``, ``baddbmm`` with the
causal mask, ``bmm``, ``transpose(0, 1).reshape(T, B, D)``, ``out_proj``), wrapped ``Bidirectional`` (the
backward copy reads the input reversed in time, its output reversed back), merged by concatenation, then a
linear layer.

Bug (argument): ``reverse-batch-axis``: the backward output reversed on axis 1 (the batch) instead of 0."""

import sys

import torch
from torch import nn

BUGS = ("reverse-batch-axis",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class TimeMajorCausalAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, go_backwards=False):
        super().__init__()
        self.num_heads, self.head_dim, self.go_backwards = num_heads, embed_dim // num_heads, go_backwards
        self.in_proj = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):                                                              # (T, B, D)
        if self.go_backwards:
            x = torch.flip(x, dims=[0])
        tgt_len, bsz, embed_dim = x.shape
        q, k, v = self.in_proj(x).chunk(3, dim=-1)
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        k = k.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        v = v.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        causal = torch.full((tgt_len, tgt_len), float("-inf")).triu(1)
        attn = torch.baddbmm(causal, q * self.head_dim ** -0.5, k.transpose(-2, -1)).softmax(dim=-1)
        out = torch.bmm(attn, v).transpose(0, 1).reshape(tgt_len, bsz, embed_dim)
        return self.out_proj(out)


class Bidirectional(nn.Module):
    def __init__(self, embed_dim, num_heads, time_major=True, bug=""):
        super().__init__()
        self.time_major, self.bug = time_major, bug
        self.forward_layer = TimeMajorCausalAttention(embed_dim, num_heads)
        self.backward_layer = TimeMajorCausalAttention(embed_dim, num_heads, go_backwards=True)

    def forward(self, x):
        y = self.forward_layer(x)
        y_rev = self.backward_layer(x)
        time_dim = 0 if self.time_major else 1
        if self.bug == "reverse-batch-axis":
            y_rev = torch.flip(y_rev, dims=[1])                                            # [reverse]
        else:
            y_rev = torch.flip(y_rev, dims=[time_dim])                                     # [reverse]
        return torch.cat([y, y_rev], dim=-1)


class Tagger(nn.Module):
    def __init__(self, D, H, bug=""):
        super().__init__()
        self.encoder = Bidirectional(D, H, bug=bug)
        self.head = nn.Linear(2 * D, D)

    def forward(self, x):                                                              # (B, T, D)
        return self.head(self.encoder(x.transpose(0, 1))).transpose(0, 1)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Tagger(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""PaddlePaddle/PaddleNLP issue #6672 ("beam search 存在一些问题", labelled bug): between beam-search steps the
generation loop reordered every cached tensor with ``index_select(x, beam_idx)`` on axis 0, the batch axis
of most models; ChatGLM keeps its cache sequence-first, ``(kv_length, batch, heads, head_dim)``, so axis 0
is the cached tokens: the beams were not reordered, and the cache was cut to as many tokens as there are
beams (an error in paddle where kv_length != batch; torch's ``index_select`` raises only where an index is
out of range). The fix selects along the cache's batch axis.

ChatGLM's idiom: sequence-first hidden states ``(T, B, D)``, a fused ``query_key_value`` split per head
``view(T, B, H, 3·d)`` and ``split(d, dim=-1)``, the cache joined with ``cat(dim=0)``, scores by
``permute`` to ``(B, H, T, S)``. The model runs a prefill over T tokens, ranks the beams by their last
token, reorders the cache and the step's input by ``beam_idx``, then runs one decoding step.

Bug (argument): ``select-axis-0``: the cache reordered along its axis 0 (its tokens)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("select-axis-0",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class SelfAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states, layer_past=None):
        T, B, _ = hidden_states.shape
        mixed = self.query_key_value(hidden_states).view(T, B, self.num_heads, 3 * self.head_dim)
        q, k, v = mixed.split(self.head_dim, dim=-1)                           # (T, B, H, d)
        if layer_past is not None:
            k = torch.cat((layer_past[0], k), dim=0)                           # (P+T, B, H, d)
            v = torch.cat((layer_past[1], v), dim=0)
        present = (k, v)
        qh, kh, vh = q.permute(1, 2, 0, 3), k.permute(1, 2, 0, 3), v.permute(1, 2, 0, 3)  # (B, H, *, d)
        scores = qh @ kh.transpose(-1, -2) / math.sqrt(self.head_dim)          # (B, H, T, P+T)
        if layer_past is None:
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
        context = F.softmax(scores, dim=-1) @ vh                               # (B, H, T, d)
        context = context.permute(2, 0, 1, 3).reshape(T, B, -1)                # (T, B, D)
        return self.dense(context), present


class BeamStep(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.attn = SelfAttention(hidden_size, num_heads)
        self.bug = bug

    def reorder_cache(self, past, beam_idx):
        axis = 0 if self.bug == "select-axis-0" else 1
        return tuple(x.index_select(axis, beam_idx) for x in past)              # [reorder]

    def forward(self, prompt, step):
        out, past = self.attn(prompt)                                          # prefill: (T, B, D)
        beam_scores = out[-1].logsumexp(dim=-1)                                # (B,)
        beam_idx = beam_scores.argsort(descending=True)                        # (B,)
        past = self.reorder_cache(past, beam_idx)
        step = step.index_select(1, beam_idx)                                  # (1, B, D)
        out, _ = self.attn(step, past)                                         # one more token
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return BeamStep(D, H, bug).eval(), (torch.randn(T, B, D), torch.randn(1, B, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""awf/functional-transformer issue #8 ("Implementation of Attention is wrong.", closed; AlexanderMath: "Mistake 1.
The attention heads are all summed together; they should be concatenated ... Mistake 2. After the missing
concatenation there should have been another linear layer"): each head projected the values to the full model
width (``L x Dm``) and added its output into the embeddings, ``embeddings += self_attn``, so the heads are
summed rather than concatenated and there is no output projection.

The idiom: the repository's functional transformer (a loop over ``layer.heads``, each head with its own
``query``/``key``/``value`` linear maps, ``score = query @ key.T + mask``, ``softmax(tau * score, axis=1)``, an
additive causal mask of ``-inf`` above the diagonal), one sequence ``L x Dm`` at a time, written with torch
(``nn.Linear`` per head) in place of jax.

Bug (head merge): ``heads-summed``: each head's value map is ``Dm -> Dm`` and its output is added into the
embeddings; the fix concatenates the per-head ``L x Dk`` outputs and applies the output linear map."""

import math
import sys

import torch
from torch import nn

BUGS = ("heads-summed",)
TWINS = ()
DIMS = ("T=6 D=32 H=4",)


class Head(nn.Module):
    def __init__(self, d_model, d_k, d_v):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(d_model, d_k), nn.Linear(d_model, d_k), nn.Linear(d_model, d_v)


class Layer(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.bug = bug
        d_k = d_model // n_heads
        d_v = d_model if bug == "heads-summed" else d_k
        self.heads = nn.ModuleList(Head(d_model, d_k, d_v) for _ in range(n_heads))
        self.out = nn.Linear(n_heads * d_k, d_model)
        self.tau = 1.0 / math.sqrt(d_k)

    def forward(self, t1):
        L = t1.shape[0]
        mask = torch.triu(torch.full((L, L), float("-inf")), diagonal=1)               # L x L
        embeddings = torch.zeros_like(t1)
        outs = []
        for head in self.heads:
            query = head.query(t1)                                                      # L x Dk
            key = head.key(t1)                                                          # L x Dk
            score = query @ key.T + mask                                                # L x L
            attn = torch.softmax(self.tau * score, dim=1)                               # L x L
            value = head.value(t1)                                                      # L x Dv
            self_attn = attn @ value
            if self.bug == "heads-summed":
                embeddings = embeddings + self_attn                                     # L x Dm
            else:
                outs.append(self_attn)                                                  # L x Dk
        if self.bug != "heads-summed":
            embeddings = self.out(torch.cat(outs, dim=-1))                              # L x Dm
        return t1 + embeddings


def build(bug="", T=6, D=32, H=4):
    torch.manual_seed(0)
    return Layer(D, H, bug=bug).eval(), (torch.randn(T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

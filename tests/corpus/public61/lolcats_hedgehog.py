"""HazyResearch/lolcats, src/model/feature_map.py (``FeatureMapMLP``: a per-head ``layer`` of shape ``(num_heads,
head_dim, feature_dim)`` applied ``einsum('hdf,bhld->bhlf', self.layer, x) + self.bias``; ``SoftmaxDim``:
``cat([softmax(x, dim=-1), softmax(-x, dim=-1)], dim=-1).clamp(min=eps)``; ``HedgehogFeatureMap``, the MLP then
the activation) and src/model/linear_attention/linear_attention.py (``quadratic_attention``: ``a =
einsum('bhmd,bhnd->bhmn', q, k)``, the causal mask ``ones((m, n)).triu(n - m + 1)`` filled with 0, ``a / (a.sum(dim=-1,
keepdim=True) + eps)``, ``einsum('bhmn,bhnd->bhmd', a, v)``; ``LolcatsLinearAttention``: a Llama attention whose
softmax is swapped for Hedgehog features, ``view(b, l, num_heads, head_dim).transpose(1, 2)``, separate feature maps
for queries and keys, ``transpose(1, 2).contiguous().view(b, l, hidden_size)``, ``o_proj``): the linearised
attention LoLCATs trains to mimic the softmax attention it replaces.

Bugs: ``feature-softmax-over-tokens``: ``SoftmaxDim`` with ``softmax(x, dim=-2)`` (the feature map normalised over
the tokens instead of the features: each token's features depend on every other token, later ones included);
``normaliser-over-queries``: ``a / a.sum(dim=-2, keepdim=True)`` (each key's column summed over the queries: the
rows of the linear attention no longer sum to one); ``mask-hides-diagonal``: ``triu(n - m)`` (the causal mask
one off: each query's own key is hidden, the first query sees nothing and divides 0 by eps)."""

import sys

import torch
from torch import nn


class FeatureMapMLP(nn.Module):
    def __init__(self, num_heads, head_dim, feature_dim):
        super().__init__()
        self.layer = nn.Parameter(torch.empty(num_heads, head_dim, feature_dim))
        nn.init.kaiming_uniform_(self.layer)
        self.bias = nn.Parameter(torch.zeros(1, num_heads, 1, feature_dim))

    def forward(self, x):
        return torch.einsum('hdf,bhld->bhlf', self.layer, x) + self.bias             # (b, h, l, f)


class SoftmaxDim(nn.Module):
    def __init__(self, eps=1e-12, bug=""):
        super().__init__()
        self.eps, self.bug = eps, bug

    def forward(self, x):
        dim = -2 if self.bug == "feature-softmax-over-tokens" else -1
        return torch.cat([torch.softmax(x, dim=dim), torch.softmax(-x, dim=dim)], dim=-1).clamp(min=self.eps)


class HedgehogFeatureMap(nn.Module):
    def __init__(self, num_heads, head_dim, feature_dim, bug=""):
        super().__init__()
        self.mlp = FeatureMapMLP(num_heads, head_dim, feature_dim)
        self.activation = SoftmaxDim(bug=bug)

    def forward(self, x):
        return self.activation(self.mlp(x))                                           # (b, h, l, 2·f)


def quadratic_attention(q, k, v, eps=1e-12, bug=""):
    a = torch.einsum('bhmd,bhnd->bhmn', q, k)                                         # (b, h, l, l)
    m, n = a.shape[-2:]
    offset = n - m if bug == "mask-hides-diagonal" else n - m + 1
    causal_mask = torch.ones((m, n), device=a.device, dtype=torch.bool).triu(offset)
    a = a.masked_fill(causal_mask, 0)
    if bug == "normaliser-over-queries":
        a = a / (a.sum(dim=-2, keepdim=True) + eps)
    else:
        a = a / (a.sum(dim=-1, keepdim=True) + eps)
    return torch.einsum('bhmn,bhnd->bhmd', a, v)                                      # (b, h, l, d)


class LolcatsLinearAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, feature_dim=6, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, hidden_size // num_heads, bug
        self.hidden_size = hidden_size
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.feature_map_q = HedgehogFeatureMap(num_heads, self.head_dim, feature_dim, bug)
        self.feature_map_k = HedgehogFeatureMap(num_heads, self.head_dim, feature_dim, bug)

    def forward(self, hidden_states):
        b, l, _ = hidden_states.size()  # noqa: E741
        q = self.q_proj(hidden_states).view(b, l, self.num_heads, self.head_dim).transpose(1, 2)   # (b, h, l, d)
        k = self.k_proj(hidden_states).view(b, l, self.num_heads, self.head_dim).transpose(1, 2)   # (b, h, l, d)
        v = self.v_proj(hidden_states).view(b, l, self.num_heads, self.head_dim).transpose(1, 2)   # (b, h, l, d)
        f_q, f_k = self.feature_map_q(q), self.feature_map_k(k)                       # (b, h, l, 2·f)
        y_true = quadratic_attention(f_q, f_k, v, bug=self.bug)                       # (b, h, l, d)
        y_true = y_true.transpose(1, 2).contiguous().view(b, l, self.hidden_size)     # (b, l, h·d)
        return self.o_proj(y_true)


BUGS = ("feature-softmax-over-tokens", "normaliser-over-queries", "mask-hides-diagonal")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=5, D=32, H=4):  # noqa: N803
    """A causal Hedgehog linear attention (6 learned features per head, 12 after the ± softmax)."""
    torch.manual_seed(0)
    return LolcatsLinearAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

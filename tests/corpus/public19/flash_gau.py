"""lucidrains/FLASH-pytorch, flash_pytorch/flash_pytorch.py (v0.1, ``GAU``, ``OffsetScale``): one head; ``hidden =
to_hidden(x)`` (SiLU) chunked into ``v, gate``; ``qk = to_qk(x)`` (SiLU) of width ``query_key_dim``;
``OffsetScale``: ``einsum('... d, h d -> ... h d', x, gamma) + beta`` unbound into ``q, k``; ``sim =
einsum('b i d, b j d -> b i j', q, k) / n``; ``attn = relu(sim) ** 2``; the causal mask ``triu(1)``
``masked_fill(.., 0.)``; ``out = einsum('b i j, b j d -> b i d', attn, v) * gate``; ``to_out``.

Bugs (argument): ``causal-triu-inverted``: ``tril(-1)`` where ``triu(1)`` is meant (the mask keeps the future);
``attn-transposed``: ``einsum('b i j, b i d -> b j d', ...)`` (each key's row summed over the queries, the slip of
an einsum written from the wrong side)."""

import sys

import torch
from torch import einsum, nn


class OffsetScale(nn.Module):
    def __init__(self, dim, heads=2):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(heads, dim))
        self.beta = nn.Parameter(torch.zeros(heads, dim))
        nn.init.normal_(self.gamma, std=0.02)

    def forward(self, x):
        out = einsum("... d, h d -> ... h d", x, self.gamma) + self.beta
        return out.unbind(dim=-2)


class GAU(nn.Module):
    def __init__(self, dim, query_key_dim=16, expansion_factor=2, bug=""):
        super().__init__()
        hidden_dim = int(expansion_factor * dim)
        self.bug = bug
        self.norm = nn.LayerNorm(dim)
        self.to_hidden = nn.Sequential(nn.Linear(dim, hidden_dim * 2), nn.SiLU())
        self.to_qk = nn.Sequential(nn.Linear(dim, query_key_dim), nn.SiLU())
        self.offsetscale = OffsetScale(query_key_dim, heads=2)
        self.to_out = nn.Linear(hidden_dim, dim)

    def forward(self, x):                                                          # (B, T, D)
        seq_len = x.shape[-2]
        normed_x = self.norm(x)
        v, gate = self.to_hidden(normed_x).chunk(2, dim=-1)                          # (B, T, E)
        qk = self.to_qk(normed_x)                                                    # (B, T, S)
        q, k = self.offsetscale(qk)
        sim = einsum("b i d, b j d -> b i j", q, k) / seq_len                        # (B, T, T)
        attn = torch.relu(sim) ** 2
        ones = torch.ones((seq_len, seq_len), dtype=torch.bool)
        causal_mask = ones.tril(-1) if self.bug == "causal-triu-inverted" else ones.triu(1)
        attn = attn.masked_fill(causal_mask, 0.0)
        if self.bug == "attn-transposed":
            out = einsum("b i j, b i d -> b j d", attn, v)
        else:
            out = einsum("b i j, b j d -> b i d", attn, v)
        out = out * gate
        return self.to_out(out) + x


BUGS = ("causal-triu-inverted", "attn-transposed")
TWINS = ()
DIMS = ("B=2 T=6 D=32",)
EQUAL = {"B=2 T=6 D=32": "B=4 T=4 D=32"}


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    return GAU(D, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

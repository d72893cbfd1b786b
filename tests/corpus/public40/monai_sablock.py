"""Project-MONAI/MONAI, monai/networks/blocks/selfattention.py (v1.3, ``SABlock``) inside
monai/networks/blocks/transformerblock.py (``TransformerBlock``), as UNETR's ViT encoder stacks it: one packed
``qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=False)``, einops layers ``Rearrange("b h (qkv l d) -> qkv b l
h d", qkv=3, l=num_heads)`` (MONAI's letters: ``h`` the tokens, ``l`` the heads) and ``Rearrange("b h l d -> b l (h
d)")`` (here ``h`` the heads, ``l`` the tokens), ``torch.einsum("blxd,blyd->blxy", q, k) * scale`` softmaxed over the
last axis, dropout, ``torch.einsum("bhxy,bhyd->bhxd", att_mat, v)``, ``out_proj``; pre-norm block with residuals and
an MLP. Traced with ``causal=True`` (SABlock's ``causal_mask = torch.tril(torch.ones(sequence_length,
sequence_length)).view(1, 1, sequence_length, sequence_length)`` buffer), as MONAI's generative models use it.

Bugs: ``scores-einsum-transposed``: the score einsum's output written ``"blxd,blyd->blyx"`` (keys before queries,
so the softmax over the last axis normalises over the queries: the natural slip of an einsum written by hand);
``causal-mask-upper``: the causal buffer built ``torch.triu`` instead of ``torch.tril`` (SABlock's ``causal=True``
path, ``att_mat.masked_fill(self.causal_mask[:, :, :T, :T] == 0, float("-inf"))``: every query sees only the
future; the tril/triu slip)."""

import sys

import torch
from einops.layers.torch import Rearrange
from torch import nn


class SABlock(nn.Module):
    def __init__(self, hidden_size, num_heads, sequence_length, dropout_rate=0.0, bug=""):
        super().__init__()
        triangle = torch.triu if bug == "causal-mask-upper" else torch.tril
        mask = triangle(torch.ones(sequence_length, sequence_length))
        self.register_buffer("causal_mask", mask.view(1, 1, sequence_length, sequence_length))
        self.bug = bug
        self.num_heads = num_heads
        self.out_proj = nn.Linear(hidden_size, hidden_size)
        self.qkv = nn.Linear(hidden_size, hidden_size * 3, bias=False)
        self.input_rearrange = Rearrange("b h (qkv l d) -> qkv b l h d", qkv=3, l=num_heads)
        self.out_rearrange = Rearrange("b h l d -> b l (h d)")
        self.drop_output = nn.Dropout(dropout_rate)
        self.drop_weights = nn.Dropout(dropout_rate)
        self.head_dim = hidden_size // num_heads
        self.scale = self.head_dim ** -0.5

    def forward(self, x):
        output = self.input_rearrange(self.qkv(x))                   # [3, B, H, T, d]
        q, k, v = output[0], output[1], output[2]
        spec = "blxd,blyd->blyx" if self.bug == "scores-einsum-transposed" else "blxd,blyd->blxy"
        att_mat = torch.einsum(spec, q, k) * self.scale
        t = x.shape[1]
        att_mat = att_mat.masked_fill(self.causal_mask[:, :, :t, :t] == 0, float("-inf"))
        att_mat = att_mat.softmax(dim=-1)
        att_mat = self.drop_weights(att_mat)
        x = torch.einsum("bhxy,bhyd->bhxd", att_mat, v)               # [B, H, T, d]
        x = self.out_rearrange(x)                                     # [B, T, D]
        x = self.out_proj(x)
        return self.drop_output(x)


class MLPBlock(nn.Module):
    def __init__(self, hidden_size, mlp_dim):
        super().__init__()
        self.linear1 = nn.Linear(hidden_size, mlp_dim)
        self.linear2 = nn.Linear(mlp_dim, hidden_size)
        self.fn = nn.GELU()

    def forward(self, x):
        return self.linear2(self.fn(self.linear1(x)))


class TransformerBlock(nn.Module):
    def __init__(self, hidden_size, mlp_dim, num_heads, sequence_length, bug=""):
        super().__init__()
        self.mlp = MLPBlock(hidden_size, mlp_dim)
        self.norm1 = nn.LayerNorm(hidden_size)
        self.attn = SABlock(hidden_size, num_heads, sequence_length, bug=bug)
        self.norm2 = nn.LayerNorm(hidden_size)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


BUGS = ("scores-einsum-transposed", "causal-mask-upper")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = TransformerBlock(D, 2 * D, H, T, bug).eval()
    return model, (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

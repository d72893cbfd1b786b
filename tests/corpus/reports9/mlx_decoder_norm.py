"""ml-explore/mlx issue #1636 ("[Bug?] Wrong layer norm used in TransformerDecoderLayer", fixed): the post-norm
decoder layer normalised the cross-attention's residual with ``self.ln1`` (the self-attention's norm) instead of
``self.ln2``; ``ln2`` was created and never used. The two norms are separate parameters that training makes
different, so the layer applied the wrong learned scale.

The idiom (ported to torch): a post-norm decoder layer, causal self-attention and cross-attention over the
encoder's memory (``nn.MultiheadAttention(batch_first=True)``), a feed-forward layer, three ``LayerNorm``s.

Twin (argument): ``ln1-twice``: a twin, not a bug the trace could show: freshly built, ``ln1`` and ``ln2`` are
the same function (weight 1, bias 0), so the values, names and dependencies recorded are the correct layer's;
only trained weights tell the two apart."""

import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("ln1-twice",)
DIMS = ("B=2 T=6 D=32 H=4",)


class TransformerDecoderLayer(nn.Module):
    def __init__(self, dims, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.self_attention = nn.MultiheadAttention(dims, heads, batch_first=True)
        self.cross_attention = nn.MultiheadAttention(dims, heads, batch_first=True)
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(dims), nn.LayerNorm(dims), nn.LayerNorm(dims)
        self.linear1, self.linear2 = nn.Linear(dims, 2 * dims), nn.Linear(2 * dims, dims)

    def forward(self, x, memory, x_mask):
        y, _ = self.self_attention(x, x, x, attn_mask=x_mask, need_weights=False)
        x = self.ln1(x + y)
        y, _ = self.cross_attention(x, memory, memory, need_weights=False)
        x = (self.ln1 if self.bug == "ln1-twice" else self.ln2)(x + y)
        y = self.linear2(torch.relu(self.linear1(x)))
        return self.ln3(x + y)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)                  # (T, T)
    return TransformerDecoderLayer(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, T + 2, D), causal)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""labmlai/annotated_deep_learning_paper_implementations issue #146 ("Bug in SA for DDPM UNet?"):
``labml_nn/diffusion/ddpm/unet.py``'s ``AttentionBlock`` flattens the feature map ``(B, C, H, W)`` to
``(B, H·W, C)``, projects it to ``(B, seq, heads, 3·d_k)``, ``chunk``s q, k, v, takes
``einsum('bihd,bjhd->bijh', q, k) * scale`` and then ``attn.softmax(dim=1)``: over the queries ``i``, not the
keys ``j``; fixed to ``softmax(dim=2)``. The maintainer confirmed it ("a typo and a big bug").

Bug (argument): ``softmax-queries``. (``res.reshape`` where the source has ``res.view``: torch 2.13's einsum
returns that product as a permuted view, which ``view`` refuses.) Sizes: B feature maps of C = D channels on
an Hp x Wp grid."""

import sys

import torch
from torch import nn

BUGS = ("softmax-queries",)
TWINS = ()
DIMS = ("B=3 Hp=2 Wp=5 D=32 H=4",)
EQUAL = {"B=3 Hp=2 Wp=5 D=32 H=4": "B=4 Hp=4 Wp=4 D=32 H=4"}


class AttentionBlock(nn.Module):
    def __init__(self, n_channels, n_heads=1, d_k=None, n_groups=4, bug=""):
        super().__init__()
        d_k = d_k or n_channels
        self.norm = nn.GroupNorm(n_groups, n_channels)
        self.projection = nn.Linear(n_channels, n_heads * d_k * 3)
        self.output = nn.Linear(n_heads * d_k, n_channels)
        self.scale, self.n_heads, self.d_k, self.bug = d_k ** -0.5, n_heads, d_k, bug

    def forward(self, x):
        batch_size, n_channels, height, width = x.shape
        x = x.view(batch_size, n_channels, -1).permute(0, 2, 1)                 # (B, seq, C)
        qkv = self.projection(x).view(batch_size, -1, self.n_heads, 3 * self.d_k)  # (B, seq, h, 3 d_k)
        q, k, v = torch.chunk(qkv, 3, dim=-1)                                    # (B, seq, h, d_k)
        attn = torch.einsum('bihd,bjhd->bijh', q, k) * self.scale               # (B, i, j, h)
        attn = attn.softmax(dim=1 if self.bug == "softmax-queries" else 2)
        res = torch.einsum('bijh,bjhd->bihd', attn, v)                          # (B, seq, h, d_k)
        res = res.reshape(batch_size, -1, self.n_heads * self.d_k)                   # (B, seq, h d_k)
        res = self.output(res)
        res += x
        return res.permute(0, 2, 1).view(batch_size, n_channels, height, width)


def build(bug="", B=3, Hp=2, Wp=5, D=32, H=4):
    torch.manual_seed(0)
    model = AttentionBlock(D, n_heads=H, d_k=D // H, bug=bug).eval()
    return model, (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

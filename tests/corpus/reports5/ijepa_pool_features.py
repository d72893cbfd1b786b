"""gaasher/I-JEPA issue #15 ("Average pooling misuse"; gaasher: "You and #13 are right about this. fixed here #16"):
the fine-tuning head pooled the ViT's output ``(batch, num_token, dim)`` with ``nn.AvgPool1d((embed_dim),
stride=1)``, which pools the last axis: each token's features were averaged into one number, ``(batch,
num_token, 1)``, squeezed, and the classifier ``nn.Linear(num_tokens, num_classes)`` read one number per
patch. The paper (and VISSL, which it cites) averages over the tokens: ``x.mean(dim=1)``, then
``nn.Linear(embed_dim, num_classes)``.

The project's idiom: a student ``Encoder`` of pre-norm blocks over patch tokens (here one block:
``qkv`` Linear to ``3·dim``, ``reshape(b, n, 3, heads, d).permute(2, 0, 3, 1, 4)``, ``q @ k^T * scale``,
``softmax(dim=-1)``, ``transpose(1, 2).reshape(b, n, dim)``, ``proj``), a ``LayerNorm`` and the head.

Bug (argument): ``pool-features``: the average over each token's features, the head over the tokens."""

import sys

import torch
from torch import nn

BUGS = ("pool-features",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
CLASSES = 10


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                                    # (b, heads, n, d)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))       # (b, n, dim)


class Finetune(nn.Module):
    def __init__(self, num_tokens, embed_dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.norm1 = nn.LayerNorm(embed_dim)
        self.attn = Attention(embed_dim, heads)
        self.norm = nn.LayerNorm(embed_dim)
        if bug == "pool-features":
            self.average_pool = nn.AvgPool1d((embed_dim), stride=1)
            self.mlp_head = nn.Linear(num_tokens, CLASSES)
        else:
            self.mlp_head = nn.Linear(embed_dim, CLASSES)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))                                    # (b, n, e)
        x = self.norm(x)
        if self.bug == "pool-features":
            x = self.average_pool(x).squeeze(-1)                            # (b, n) [pool]
        else:
            x = x.mean(dim=1)                                               # (b, e) [pool]
        return self.mlp_head(x)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Finetune(T, D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""Amshaker/SwiftFormer issue #4 ("Question about the softmax in EfficientAdditiveAttnetion"; the author: "Yes,
you are right. The softmax should be in the second dimension, this is an implementation issue"):
``EfficientAdditiveAttnetion`` scored each token by ``query @ w_g`` into ``A`` of shape ``(B, N, 1)`` and took
``A.softmax(dim=-1)``, a softmax over the one-entry last axis: every weight is 1, so the global query ``G`` is the
plain sum of the queries and the attention learns nothing. The author's fix (the repository now): the weights
over the tokens, ``torch.nn.functional.normalize(A, dim=1)`` (or ``A.softmax(dim=1)``, the reporter's reading).

The idiom (SwiftFormer's encoder block): a local representation (a 3×3 depth-wise conv, ``BatchNorm2d``, two
point-wise convs, a layer scale), then the image ``(B, C, H, W)`` flattened to tokens
``x.permute(0, 2, 3, 1).reshape(B, H * W, C)``; ``to_query``/``to_key`` linears, both L2-normalised over the
features, ``A = query @ w_g * scale_factor`` (``w_g`` a ``(D, 1)`` parameter), the global query
``G = torch.sum(A * query, dim=1)``, ``einops.repeat(G, 'b d -> b repeat d', repeat=N)``,
``Proj(G * key) + query`` and ``final``, back to ``(B, C, H, W)`` with the layer-scaled residual, then the
conv MLP (``BatchNorm2d``, 1×1 convs) with its residual.

Bug (normalisation axis): ``softmax-last-axis``: ``A.softmax(dim=-1)`` (the reported code). Twin (correct):
``softmax-over-tokens``: ``A.softmax(dim=1)``, the reporter's fix."""

import sys

import einops
import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("softmax-last-axis",)
TWINS = ("softmax-over-tokens",)
DIMS = ("B=2 D=32 Hp=4 Wp=6",)
EQUAL = {"B=2 D=32 Hp=4 Wp=6": "B=4 D=32 Hp=4 Wp=4"}


class EfficientAdditiveAttnetion(nn.Module):
    def __init__(self, in_dims, token_dim, num_heads=1, bug=""):
        super().__init__()
        self.bug = bug
        self.to_query = nn.Linear(in_dims, token_dim * num_heads)
        self.to_key = nn.Linear(in_dims, token_dim * num_heads)
        self.w_g = nn.Parameter(torch.randn(token_dim * num_heads, 1))
        self.scale_factor = token_dim ** -0.5
        self.Proj = nn.Linear(token_dim * num_heads, token_dim * num_heads)
        self.final = nn.Linear(token_dim * num_heads, token_dim)

    def forward(self, x):                                                    # (B, N, D)
        query = F.normalize(self.to_query(x), dim=-1)                         # (B, N, D)
        key = F.normalize(self.to_key(x), dim=-1)                             # (B, N, D)
        query_weight = query @ self.w_g                                       # (B, N, 1)
        A = query_weight * self.scale_factor                                  # (B, N, 1)
        if self.bug == "softmax-last-axis":
            A = A.softmax(dim=-1)
        elif self.bug == "softmax-over-tokens":
            A = A.softmax(dim=1)
        else:
            A = F.normalize(A, dim=1)
        G = torch.sum(A * query, dim=1)                                       # (B, D)
        G = einops.repeat(G, "b d -> b repeat d", repeat=key.shape[1])        # (B, N, D)
        out = self.Proj(G * key) + query                                      # (B, N, D)
        return self.final(out)


class SwiftFormerLocalRepresentation(nn.Module):
    def __init__(self, dim, kernel_size=3):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=kernel_size, padding=kernel_size // 2, groups=dim)
        self.norm = nn.BatchNorm2d(dim)
        self.pwconv1 = nn.Conv2d(dim, dim, kernel_size=1)
        self.act = nn.GELU()
        self.pwconv2 = nn.Conv2d(dim, dim, kernel_size=1)
        self.layer_scale = nn.Parameter(torch.ones(dim).unsqueeze(-1).unsqueeze(-1))

    def forward(self, x):                                                     # (B, C, H, W)
        h = self.pwconv2(self.act(self.pwconv1(self.norm(self.dwconv(x)))))
        return x + self.layer_scale * h


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(dim)
        self.fc1 = nn.Conv2d(dim, hidden, 1)
        self.act = nn.GELU()
        self.fc2 = nn.Conv2d(hidden, dim, 1)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(self.norm1(x))))


class SwiftFormerEncoder(nn.Module):
    def __init__(self, dim, mlp_ratio=4, layer_scale_init_value=1e-5, bug=""):
        super().__init__()
        self.local_representation = SwiftFormerLocalRepresentation(dim)
        self.attn = EfficientAdditiveAttnetion(in_dims=dim, token_dim=dim, num_heads=1, bug=bug)
        self.linear = Mlp(dim, dim * mlp_ratio)
        self.layer_scale_1 = nn.Parameter(layer_scale_init_value * torch.ones(dim).unsqueeze(-1).unsqueeze(-1))
        self.layer_scale_2 = nn.Parameter(layer_scale_init_value * torch.ones(dim).unsqueeze(-1).unsqueeze(-1))

    def forward(self, x):
        x = self.local_representation(x)
        B, C, H, W = x.shape
        tokens = x.permute(0, 2, 3, 1).reshape(B, H * W, C)                   # (B, N, C)
        out = self.attn(tokens).reshape(B, H, W, C).permute(0, 3, 1, 2)       # (B, C, H, W)
        x = x + self.layer_scale_1 * out
        return x + self.layer_scale_2 * self.linear(x)


def build(bug="", B=2, D=32, Hp=4, Wp=6):
    torch.manual_seed(0)
    model = SwiftFormerEncoder(D, bug=bug).eval()
    with torch.no_grad():                                # layer scales as after training (1e-5 hides everything)
        model.layer_scale_1.fill_(0.5)
        model.layer_scale_2.fill_(0.5)
    return model, (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""NVlabs/GroupViT, ``models/group_vit.py`` (2022, ``AssignAttention``, ``GroupingBlock``): learnable group
tokens ``[B, S, C]`` query the image tokens ``[B, N, C]`` (one head); ``raw_attn = (q @ k.transpose(-2, -1)) *
scale``; the assignment normalised over the *groups* (``attn_dim = -2``: each image token is assigned to one
group: ``softmax(dim=-2)``, then hard, ``hard_softmax``: ``y_hard = zeros_like(y).scatter_(dim, y.max(dim,
keepdim=True)[1], 1.0)``, ``y_hard - y_soft.detach() + y_soft``); with ``sum_assign``/``assign_eps`` the weights
renormalised over the image tokens ``attn / (attn.sum(dim=-1, keepdim=True) + assign_eps)``; ``out = attn @ v``,
``proj``; the group tokens first updated by a pre-assignment cross attention (``CrossAttnBlock``, a standard
softmax over the image tokens).

Bugs: ``hard-argmax-over-tokens``: the hard assignment's one-hot taken with ``max(dim=-1)`` over the image tokens
while the soft assignment was normalised over the groups (the slip the repository's issue on ``hard_softmax``'s
``dim`` describes: the straight-through one-hot and the soft weights then disagree); ``renormalise-over-groups``:
the ``assign_eps`` renormalisation's sum taken over ``dim=-2`` (the groups, already normalised by the softmax:
the step does nothing and the weights over tokens are never normalised)."""

import sys

import torch
from torch import nn


def hard_softmax(logits, dim, argmax_dim):
    y_soft = logits.softmax(dim)
    index = y_soft.max(argmax_dim, keepdim=True)[1]
    y_hard = torch.zeros_like(logits).scatter_(argmax_dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


class CrossAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, query, key):
        B, S, C = query.shape
        N = key.shape[1]
        q = self.q_proj(query).reshape(B, S, self.heads, C // self.heads).permute(0, 2, 1, 3)
        k = self.k_proj(key).reshape(B, N, self.heads, C // self.heads).permute(0, 2, 1, 3)
        v = self.v_proj(key).reshape(B, N, self.heads, C // self.heads).permute(0, 2, 1, 3)
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(B, S, C)
        return self.proj(out)


class AssignAttention(nn.Module):
    def __init__(self, dim, bug=""):
        super().__init__()
        self.bug, self.scale = bug, dim ** -0.5
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.assign_eps = 1.0

    def forward(self, query, key):
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(key)        # (B, S, C), (B, N, C)
        raw_attn = (q @ k.transpose(-2, -1)) * self.scale                      # (B, S, N)
        argmax_dim = -1 if self.bug == "hard-argmax-over-tokens" else -2
        attn = hard_softmax(raw_attn, dim=-2, argmax_dim=argmax_dim)
        sum_dim = -2 if self.bug == "renormalise-over-groups" else -1
        attn = attn / (attn.sum(dim=sum_dim, keepdim=True) + self.assign_eps)
        return self.proj(attn @ v)


class GroupingBlock(nn.Module):
    def __init__(self, dim, heads, groups, bug=""):
        super().__init__()
        self.group_token = nn.Parameter(torch.randn(1, groups, dim) * 0.02)
        self.norm_tokens, self.norm_x = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.pre_assign = CrossAttention(dim, heads)
        self.assign = AssignAttention(dim, bug)
        self.norm_out = nn.LayerNorm(dim)

    def forward(self, x):
        x = self.norm_x(x)
        group_tokens = self.norm_tokens(self.group_token.expand(x.shape[0], -1, -1))
        group_tokens = group_tokens + self.pre_assign(group_tokens, x)
        return self.norm_out(self.assign(group_tokens, x) + group_tokens)


BUGS = ("hard-argmax-over-tokens", "renormalise-over-groups")
TWINS = ()
#: T: image tokens, G: group tokens
DIMS = ("B=2 T=9 G=5 D=32 H=4",)


def build(bug="", B=2, T=9, G=5, D=32, H=4):
    torch.manual_seed(0)
    return GroupingBlock(D, H, G, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

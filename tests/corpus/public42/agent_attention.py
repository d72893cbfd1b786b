"""LeapLabTHU/Agent-Attention, agent_transformer/models/agent_deit.py (``AgentAttention``), 36cf0da: agent
attention (ECCV 2024), softmax attention through a few agent tokens. ``qkv(x).reshape(b, n, 3, c).permute(2,
0, 1, 3)``; the agents pooled from the queries as an image: ``self.pool(q.reshape(b, h, w, c).permute(0, 3, 1,
2)).reshape(b, c, -1).permute(0, 2, 1)`` (``AdaptiveAvgPool2d`` to ``sqrt(agent_num)`` each way); q, k, v and
the agents split ``reshape(b, n, num_heads, head_dim).permute(0, 2, 1, 3)``; agent attention ``softmax((agents
* scale) @ k.transpose(-2, -1) + position_bias)`` and ``agent_v = agent_attn @ v``; query attention
``softmax((q * scale) @ agents.transpose(-2, -1) + agent_bias)`` and ``x = q_attn @ agent_v``; ``x.transpose(1,
2).reshape(b, n, c)`` plus a depthwise conv over v as an image (``v.transpose(1, 2).reshape(b, h, w,
c).permute(0, 3, 1, 2)``, back by ``permute(0, 2, 3, 1).reshape(b, n, c)``), ``proj``. This is the file's
path without a class token (its ``q[:, 1:]`` slice and ``ac_bias``/``ca_bias`` dropped); of the position biases
only the separable ``ah_bias + aw_bias`` (agents x rows x columns) and ``ha_bias + wa_bias`` are kept (the
``an_bias``/``na_bias`` bilinear ``interpolate`` from 7x7 left out).

Bugs: ``pool-without-permute``: the agents pooled from ``q.reshape(b, c, h, w)`` (the channels-last tokens
read as a channels-first image, the transpose forgotten before the reshape: each "channel" the pool averages
is a run of tokens' features); ``agent-heads-interleaved``: the agents split ``reshape(b, agent_num,
head_dim, num_heads).permute(0, 3, 1, 2)`` (heads as the inner factor) while q, k and v take them outer."""

import sys

import torch
from torch import nn


class AgentAttention(nn.Module):
    def __init__(self, dim, num_heads=4, agent_num=4, window=4, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)
        self.softmax = nn.Softmax(dim=-1)
        self.agent_num = agent_num
        self.window = window
        self.dwc = nn.Conv2d(dim, dim, kernel_size=(3, 3), padding=1, groups=dim)
        self.ah_bias = nn.Parameter(torch.randn(1, num_heads, agent_num, window, 1) * 0.02)
        self.aw_bias = nn.Parameter(torch.randn(1, num_heads, agent_num, 1, window) * 0.02)
        self.ha_bias = nn.Parameter(torch.randn(1, num_heads, window, 1, agent_num) * 0.02)
        self.wa_bias = nn.Parameter(torch.randn(1, num_heads, 1, window, agent_num) * 0.02)
        pool_size = int(agent_num ** 0.5)
        self.pool = nn.AdaptiveAvgPool2d(output_size=(pool_size, pool_size))

    def forward(self, x):
        b, n, c = x.shape
        h = w = int(n ** 0.5)
        nh, hd = self.num_heads, self.head_dim
        qkv = self.qkv(x).reshape(b, n, 3, c).permute(2, 0, 1, 3)  # (3, B, T, D)
        q, k, v = qkv.unbind(0)
        if self.bug == "pool-without-permute":
            agent_tokens = self.pool(q.reshape(b, c, h, w)).reshape(b, c, -1).permute(0, 2, 1)  # (B, A, D)
        else:
            img = q.reshape(b, h, w, c).permute(0, 3, 1, 2)  # (B, D, h, w)
            agent_tokens = self.pool(img).reshape(b, c, -1).permute(0, 2, 1)  # (B, A, D)  #
        q = q.reshape(b, n, nh, hd).permute(0, 2, 1, 3)  # (B, H, T, d_k)
        k = k.reshape(b, n, nh, hd).permute(0, 2, 1, 3)  # (B, H, T, d_k)
        v = v.reshape(b, n, nh, hd).permute(0, 2, 1, 3)  # (B, H, T, d_k)
        if self.bug == "agent-heads-interleaved":
            agent_tokens = agent_tokens.reshape(b, self.agent_num, hd, nh).permute(0, 3, 1, 2)  # (B, H, A, d_k)
        else:
            agent_tokens = agent_tokens.reshape(b, self.agent_num, nh, hd).permute(0, 2, 1, 3)  # (B, H, A, d_k)
        position_bias = (self.ah_bias + self.aw_bias).reshape(1, nh, self.agent_num, -1)  # (1, H, A, T)
        position_bias = position_bias.repeat(b, 1, 1, 1)  # (B, H, A, T)
        agent_attn = self.softmax((agent_tokens * self.scale) @ k.transpose(-2, -1) + position_bias)  # (B, H, A, T)
        agent_v = agent_attn @ v  # (B, H, A, d_k)
        agent_bias = (self.ha_bias + self.wa_bias).reshape(1, nh, -1, self.agent_num)  # (1, H, T, A)
        agent_bias = agent_bias.repeat(b, 1, 1, 1)  # (B, H, T, A)
        q_attn = self.softmax((q * self.scale) @ agent_tokens.transpose(-2, -1) + agent_bias)  # (B, H, T, A)
        x = q_attn @ agent_v  # (B, H, T, d_k)
        x = x.transpose(1, 2).reshape(b, n, c)  # (B, T, D)
        v = v.transpose(1, 2).reshape(b, h, w, c).permute(0, 3, 1, 2)  # (B, D, h, w)
        x = x + self.dwc(v).permute(0, 2, 3, 1).reshape(b, n, c)  # (B, T, D)
        return self.proj(x)


class AgentBlock(nn.Module):
    def __init__(self, dim, num_heads, window, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = AgentAttention(dim, num_heads=num_heads, agent_num=4, window=window, bug=bug)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


BUGS = ("pool-without-permute", "agent-heads-interleaved")
TWINS = ()
DIMS = ("B=2 T=9 D=32 H=4",)
EQUAL = {"B=2 T=9 D=32 H=4": "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=9, D=32, H=4):
    torch.manual_seed(0)
    side = int(T ** 0.5)
    model = AgentBlock(D, H, side, bug).eval()
    return model, (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

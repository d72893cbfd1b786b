"""Blaizzy/mlx-vlm pull request #669 ("fix(gemma3): correct attention mask creation for sliding window"): in
``Gemma3Model.__call__`` the sliding-window layers' mask was made by ``create_attention_mask(h, cache)`` with the
whole cache list and no ``window_size``, so the sliding layers got the plain causal mask and Gemma 3 produced garbled
text past its window ("This is. This is."); the fix passes ``cache[0]`` and ``window_size=self.config.sliding_window``.
With ml-explore/mlx-lm pull request #390 ("fix window attention mask", merged: "The window attention mask had one too
many values"): ``create_causal_mask`` banded with ``linds <= rinds + window_size``, a window of W + 1 keys; the fix
writes ``linds < rinds + window_size``.

The idiom (mlx-lm ``base.create_causal_mask`` and ``gemma3_text.py``, written in torch; mlx's boolean mask keeps
``True`` as torch's ``scaled_dot_product_attention`` does): ``rinds = arange(offset + N)``, ``linds = arange(offset,
offset + N)[:, None]``, ``mask = linds >= rinds`` and the window band; ``Attention``: ``q_proj``/``k_proj``/``v_proj``
without bias, ``reshape(B, L, n_heads, -1).transpose(1, 2)``, ``q_norm``/``k_norm`` (Gemma's ``1 + weight``
RMSNorm) over the head width, rotary (base 10 000 on sliding layers, 1 000 000 on global ones), ``scale =
query_pre_attn_scalar ** -0.5``, the fused attention, ``transpose(1, 2).reshape(B, L, -1)``, ``o_proj``; sandwich
norms and the GELU-gated MLP. Two layers, ``sliding_window_pattern = 2`` (layer 0 sliding, layer 1 global), a window
of 3 over the prompt.

Bugs: ``sliding-mask-no-window``: the sliding layers get the causal mask without its window (PR #669);
``window-not-causal``: the band ``linds < rinds + window_size`` written in place of the causal mask, not and-ed with
it (every later key inside the band is seen). Twin (argument, as reports3's Mistral ``window-plus-one``):
``window-one-too-many``: ``<=`` (PR #390): which width a model was trained with is a number in its configuration."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("sliding-mask-no-window", "window-not-causal")
TWINS = ("window-one-too-many",)
DIMS = ("B=2 T=7 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}
SLIDING_WINDOW, SLIDING_WINDOW_PATTERN = 3, 2


def create_causal_mask(N, offset=0, window_size=None, bug=""):
    rinds = torch.arange(offset + N)
    linds = torch.arange(offset, offset + N) if offset else rinds
    linds = linds[:, None]                                                              # (T, 1)
    rinds = rinds[None]                                                                 # (1, T)
    mask = linds >= rinds                                                               # (T, T)
    if window_size is not None:
        if bug == "window-one-too-many":
            mask = mask & (linds <= rinds + window_size)
        elif bug == "window-not-causal":
            mask = linds < rinds + window_size
        else:
            mask = mask & (linds < rinds + window_size)
    return mask


class RMSNorm(nn.Module):
    def __init__(self, dims, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.zeros(dims)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)


def rope(x, base):
    L, d = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))
    freqs = torch.outer(torch.arange(L).float(), inv_freq)                              # (L, d/2)
    cos, sin = freqs.cos(), freqs.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)                # (B, H, L, d)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, is_sliding):
        super().__init__()
        self.n_heads, head_dim = n_heads, dim // n_heads
        self.scale = head_dim ** -0.5                                                   # query_pre_attn_scalar
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.q_norm, self.k_norm = RMSNorm(head_dim), RMSNorm(head_dim)
        self.rope_base = 10000.0 if is_sliding else 1000000.0

    def forward(self, x, mask):
        B, L, _ = x.shape
        queries = self.q_proj(x).reshape(B, L, self.n_heads, -1).transpose(1, 2)       # (B, H, L, d)
        keys = self.k_proj(x).reshape(B, L, self.n_heads, -1).transpose(1, 2)          # (B, H, L, d)
        values = self.v_proj(x).reshape(B, L, self.n_heads, -1).transpose(1, 2)        # (B, H, L, d)
        queries, keys = rope(self.q_norm(queries), self.rope_base), rope(self.k_norm(keys), self.rope_base)
        output = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=self.scale)
        return self.o_proj(output.transpose(1, 2).reshape(B, L, -1))                    # (B, L, D)


class TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads, layer_idx):
        super().__init__()
        self.is_sliding = (layer_idx + 1) % SLIDING_WINDOW_PATTERN != 0
        self.self_attn = Attention(dim, n_heads, self.is_sliding)
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(dim), RMSNorm(dim)
        self.pre_feedforward_layernorm, self.post_feedforward_layernorm = RMSNorm(dim), RMSNorm(dim)
        self.gate_proj, self.up_proj = nn.Linear(dim, 2 * dim, bias=False), nn.Linear(dim, 2 * dim, bias=False)
        self.down_proj = nn.Linear(2 * dim, dim, bias=False)

    def forward(self, x, mask):
        h = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), mask))
        r = self.pre_feedforward_layernorm(h)
        r = self.down_proj(F.gelu(self.gate_proj(r), approximate="tanh") * self.up_proj(r))
        return h + self.post_feedforward_layernorm(r)


class Gemma3Model(nn.Module):
    def __init__(self, dim, n_heads, bug=""):
        super().__init__()
        self.bug, self.sliding_window = bug, SLIDING_WINDOW                             # args.sliding_window
        self.layers = nn.ModuleList(TransformerBlock(dim, n_heads, i) for i in range(SLIDING_WINDOW_PATTERN))
        self.norm = RMSNorm(dim)

    def forward(self, h):                                                               # (B, T, D)
        N = h.shape[1]
        global_mask = create_causal_mask(N)
        if self.bug == "sliding-mask-no-window":
            sliding_window_mask = create_causal_mask(N)
        else:
            sliding_window_mask = create_causal_mask(N, window_size=self.sliding_window, bug=self.bug)
        for layer in self.layers:
            h = layer(h, sliding_window_mask if layer.is_sliding else global_mask)
        return self.norm(h)                                                             # (B, T, D)


def build(bug="", B=2, T=7, D=32, H=4):
    torch.manual_seed(0)
    return Gemma3Model(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

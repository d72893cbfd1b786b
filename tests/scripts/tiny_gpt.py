"""A small decoder-only transformer written with torch alone, traced from token ids [B, T].

Pre-norm blocks: x + attn(ln(x)), then x + mlp(ln(x)); separate q/k/v projections split into heads
with view + transpose. ``--odd-layer N`` gives layer N an extra op (q made contiguous) so it differs;
``--odd-heads N`` gives layer N a different head count. Used by tests/app/test_whole_model.py and
benchmarks/bench_whole_model.py.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, d_model: int, heads: int, extra_op: bool = False):
        super().__init__()
        self.heads, self.extra_op = heads, extra_op
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, D = x.shape
        H, d_k = self.heads, D // self.heads
        q = self.q_proj(x).view(B, T, H, d_k).transpose(1, 2)         # (B, H, T, d_k)
        k = self.k_proj(x).view(B, T, H, d_k).transpose(1, 2)         # (B, H, T, d_k)
        v = self.v_proj(x).view(B, T, H, d_k).transpose(1, 2)         # (B, H, T, d_k)
        if self.extra_op:
            q = q.contiguous()                                        # (B, H, T, d_k)
        scores = q @ k.transpose(-2, -1) / d_k ** 0.5                 # (B, H, T, T)
        weights = F.softmax(scores, dim=-1)                           # (B, H, T, T)
        out = weights @ v                                             # (B, H, T, d_k)
        out = out.transpose(1, 2).contiguous().view(B, T, D)          # (B, T, D)
        return self.out_proj(out)                                     # (B, T, D)


class MLP(nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.up = nn.Linear(d_model, 4 * d_model)
        self.down = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))                          # (B, T, D)


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int, extra_op: bool = False):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model, heads, extra_op)
        self.mlp = MLP(d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))                                # (B, T, D)
        return x + self.mlp(self.ln2(x))                              # (B, T, D)


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, d_model: int, heads: int, n_layers: int, odd_layer: int | None = None,
                 odd_heads: int | None = None):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList(
            Block(d_model, odd_heads if (i == odd_layer and odd_heads) else heads,
                  extra_op=(i == odd_layer and not odd_heads)) for i in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)

    def forward(self, ids):
        x = self.wte(ids)                                             # (B, T, D)
        for block in self.layers:
            x = block(x)                                              # (B, T, D)
        return self.ln_f(x)                                           # (B, T, D)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=6)
    parser.add_argument("--odd-layer", type=int, default=None)
    parser.add_argument("--odd-heads", type=int, default=None)
    a = parser.parse_args()
    torch.manual_seed(0)
    model = TinyGPT(100, a.d_model, a.heads, a.layers, a.odd_layer, a.odd_heads).eval()
    ids = torch.randint(0, 100, (2, a.tokens))                        # (B, T)
    with torch.no_grad():
        out = model(ids)                                              # (B, T, D)
    print(tuple(out.shape))


if __name__ == "__main__":
    main()

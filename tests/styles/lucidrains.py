"""lucidrains-style attention: to_q / fused to_kv, einops rearrange with spaces, torch.einsum with spaces."""

import torch
from einops import rearrange
from torch import einsum, nn

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 2, "T": 4, "D": 16, "H": 4},   # T == H == d_k
    {"B": 2, "T": 8, "D": 16, "H": 2},   # T == d_k
]


class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)

    def forward(self, x):
        h = self.heads
        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim=-1))                    # 3 x (B, T, D) [kv]
        q = rearrange(q, 'b n (h d) -> b h n d', h=h)                                  # (B, H, T, d_k) [q]
        k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=h), (k, v))        # 2 x (B, H, T, d_k) [v]
        sim = einsum('b h i d, b h j d -> b h i j', q, k) * self.scale                 # (B, H, T, T) [scores]
        attn = sim.softmax(dim=-1)                                                     # (B, H, T, T)
        out = einsum('b h i j, b h j d -> b h i d', attn, v)                           # (B, H, T, d_k) [y]
        out = rearrange(out, 'b h n d -> b n (h d)')                                   # (B, T, D) [merged]
        return self.to_out(out)                                                        # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    model = Attention(dims["D"], heads=dims["H"], dim_head=dims["D"] // dims["H"])
    return model.eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)

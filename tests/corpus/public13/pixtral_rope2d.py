"""huggingface/transformers, src/transformers/models/pixtral/modeling_pixtral.py (v4.47,
``PixtralRotaryEmbedding``, ``position_ids_in_meshgrid``, ``PixtralAttention``): a 2-D rotary whose table is
built once for the largest grid, ``freqs_h = outer(h, freqs[::2])`` and ``freqs_w = outer(w, freqs[1::2])``
joined ``cat([freqs_h[:, None, :].repeat(1, max_w, 1), freqs_w[None, :, :].repeat(max_h, 1, 1)], dim=-1)
.reshape(-1, dim // 2)`` and ``cat((inv_freq, inv_freq), dim=-1)``; each image's patches then pick their rows by
``ids = h_grid * max_width + v_grid`` (``torch.meshgrid(arange(height), arange(width), indexing="ij")``),
``freqs = self.inv_freq[position_ids]``; q/k/v ``view(B, N, H, d).transpose(1, 2)``, Llama's ``rotate_half``
applied with ``unsqueeze_dim=0``, eager softmax attention, ``o_proj``. One image of 2 x 3 patches in a grid of
at most 4 x 4 (the image smaller than the table, as every image but the largest is).

Bugs (argument): ``rows-columns-swapped``: ``ids = v_grid * max_width + h_grid`` (the row and column ids
exchanged, the slip ``meshgrid``'s two outputs invite: each patch rotated by another patch's position);
``table-not-indexed``: ``self.inv_freq[:num_patches]`` (the first rows of the largest grid's table, as a 1-D
rotary would be sliced: right only where the image is as wide as the table)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class PixtralRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_patches_per_side, theta=10000.0):
        super().__init__()
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))          # (d/2,)
        h = torch.arange(max_patches_per_side)
        w = torch.arange(max_patches_per_side)
        freqs_h = torch.outer(h, freqs[::2]).float()                                # (max_h, d/4)
        freqs_w = torch.outer(w, freqs[1::2]).float()                               # (max_w, d/4)
        inv_freq = torch.cat([freqs_h[:, None, :].repeat(1, max_patches_per_side, 1),
                              freqs_w[None, :, :].repeat(max_patches_per_side, 1, 1)], dim=-1).reshape(-1, dim // 2)
        self.register_buffer("inv_freq", torch.cat((inv_freq, inv_freq), dim=-1), persistent=False)  # (max², d)

    def forward(self, x, position_ids):
        freqs = self.inv_freq[position_ids]                                          # (N, d)
        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)


class PixtralAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.num_heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim**-0.5
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def forward(self, hidden_states, position_embeddings):
        batch_size, patches, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(batch_size, patches, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(batch_size, patches, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(batch_size, patches, self.num_heads, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)                                # (1, N, d)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.scale              # (B, H, N, N)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()    # (B, N, H, d)
        return self.o_proj(attn_output.reshape(batch_size, patches, -1))


class PixtralTransformer(nn.Module):
    def __init__(self, dim, heads, height, width, bug="", max_side=4):
        super().__init__()
        self.height, self.width, self.max_width, self.bug = height, width, max_side, bug
        self.patch_positional_embedding = PixtralRotaryEmbedding(dim // heads, max_side)
        self.attention, self.norm = PixtralAttention(dim, heads), nn.LayerNorm(dim)

    def position_ids_in_meshgrid(self):
        h_grid, v_grid = torch.meshgrid(torch.arange(self.height), torch.arange(self.width), indexing="ij")
        if self.bug == "rows-columns-swapped":
            return (v_grid * self.max_width + h_grid).reshape(-1)
        return (h_grid * self.max_width + v_grid).reshape(-1)                      # (N,)

    def forward(self, patch_embeds):                                                # (B, N, D)
        if self.bug == "table-not-indexed":
            inv_freq = self.patch_positional_embedding.inv_freq[: patch_embeds.shape[1]]
            position_embeddings = inv_freq.cos(), inv_freq.sin()
        else:
            position_ids = self.position_ids_in_meshgrid()
            position_embeddings = self.patch_positional_embedding(patch_embeds, position_ids)
        return patch_embeds + self.attention(self.norm(patch_embeds), position_embeddings)


BUGS = ("rows-columns-swapped", "table-not-indexed")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    height = 2
    return PixtralTransformer(D, H, height, T // height, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""lucidrains/vit-pytorch, vit_pytorch/na_vit.py (``NaViT``, ``Attention``, ``RMSNorm``; file as of commit b80676e,
2025), Patch n' Pack of Dehghani et al. 2023: the patches of several images packed into one sequence per row (here
handed in packed: ``patches [b, n, p]``, each token's ``image_ids`` and ``(h, w)`` position, the packed
``lengths``, the ``num_images`` of each row); the key padding mask ``rearrange(arange(n), 'n -> 1 n') <
rearrange(lengths, 'b -> b 1')``; the block-diagonal mask ``rearrange(ids, 'b i -> b 1 i 1') == rearrange(ids, 'b j
-> b 1 1 j')`` and-ed with the padding mask ``'b j -> b 1 1 j'``; factorised 2-d position tables
``pos_embed_height[h_indices] + pos_embed_width[w_indices]``; attention with per-head RMS query/key norms and
``F.scaled_dot_product_attention(q, k, v, attn_mask=..., scale=1.)``; then attention pooling, one learned query per
image slot (``repeat(attn_pool_queries, 'd -> b n d')``), masked ``rearrange(arange(max_queries), 'i -> i 1') ==
rearrange(ids, 'b j -> b 1 j')``; the pooled slots flattened ``'b n d -> (b n) d'`` and kept where ``arange <
num_images`` (``'b n -> (b n)'``), then the head.

Bugs: ``pad-mask-on-queries``: the padding mask put on the query axis, ``rearrange(key_pad_mask, 'b i -> b 1 i
1')`` (the padding's own rows emptied, while the real tokens of the first image still attend the padding, whose
image id is 0); ``pooled-flattened-n-major``: the pooled slots flattened as ``x.transpose(0, 1).reshape(-1, d)``
(``(n b) d``) while the keep mask is flattened ``(b n)``: the rows kept are other images' slots."""

import sys

import torch
from einops import rearrange, repeat
from torch import nn
from torch.nn import functional as F


class RMSNorm(nn.Module):
    def __init__(self, heads, dim):
        super().__init__()
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones(heads, 1, dim))

    def forward(self, x):
        return F.normalize(x, dim=-1) * self.scale * self.gamma


class Attention(nn.Module):
    def __init__(self, dim, heads, dim_head):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.q_norm = RMSNorm(heads, dim_head)
        self.k_norm = RMSNorm(heads, dim_head)
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim, bias=False)

    def forward(self, x, context=None, attn_mask=None):
        x = self.norm(x)
        kv_input = x if context is None else context
        qkv = (self.to_q(x), *self.to_kv(kv_input).chunk(2, dim=-1))
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in qkv)   # (b, h, n, d) each
        q, k = self.q_norm(q), self.k_norm(k)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=1.0)   # (b, h, n, d)
        out = rearrange(out, "b h n d -> b n (h d)")                                 # (b, n, h·d)
        return self.to_out(out)


class NaViT(nn.Module):
    def __init__(self, patch_dim, dim, heads, num_classes=10, max_side=5, bug=""):
        super().__init__()
        self.bug = bug
        self.to_patch_embedding = nn.Sequential(nn.LayerNorm(patch_dim), nn.Linear(patch_dim, dim),
                                                nn.LayerNorm(dim))
        self.pos_embed_height = nn.Parameter(torch.randn(max_side, dim))
        self.pos_embed_width = nn.Parameter(torch.randn(max_side, dim))
        self.attn = Attention(dim, heads, dim // heads)
        self.ff = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))
        self.attn_pool_queries = nn.Parameter(torch.randn(dim))
        self.attn_pool = Attention(dim, heads, dim // heads)
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes, bias=False))

    def forward(self, patches, patch_positions, image_ids, lengths, num_images):
        n = patches.shape[1]
        key_pad_mask = rearrange(torch.arange(n), "n -> 1 n") < rearrange(lengths, "b -> b 1")   # (b, n)
        attn_mask = rearrange(image_ids, "b i -> b 1 i 1") == rearrange(image_ids, "b j -> b 1 1 j")   # (b, 1, n, n)
        if self.bug == "pad-mask-on-queries":
            attn_mask = attn_mask & rearrange(key_pad_mask, "b i -> b 1 i 1")
        else:
            attn_mask = attn_mask & rearrange(key_pad_mask, "b j -> b 1 1 j")

        x = self.to_patch_embedding(patches)                                         # (b, n, dim)
        h_indices, w_indices = patch_positions.unbind(dim=-1)                        # (b, n) each
        x = x + self.pos_embed_height[h_indices] + self.pos_embed_width[w_indices]
        x = self.attn(x, attn_mask=attn_mask) + x
        x = self.ff(x) + x

        max_queries = int(num_images.amax().item())
        queries = repeat(self.attn_pool_queries, "d -> b n d", n=max_queries, b=x.shape[0])   # (b, N, dim)
        image_id_arange = torch.arange(max_queries)
        attn_pool_mask = rearrange(image_id_arange, "i -> i 1") == rearrange(image_ids, "b j -> b 1 j")   # (b, N, n)
        attn_pool_mask = attn_pool_mask & rearrange(key_pad_mask, "b j -> b 1 j")
        attn_pool_mask = rearrange(attn_pool_mask, "b i j -> b 1 i j")               # (b, 1, N, n)
        x = self.attn_pool(queries, context=x, attn_mask=attn_pool_mask) + queries   # (b, N, dim)

        if self.bug == "pooled-flattened-n-major":
            x = x.transpose(0, 1).reshape(-1, x.shape[-1])                           # ((N b), dim)
        else:
            x = rearrange(x, "b n d -> (b n) d")                                     # ((b N), dim)
        is_images = image_id_arange < rearrange(num_images, "b -> b 1")              # (b, N)
        is_images = rearrange(is_images, "b n -> (b n)")
        return self.mlp_head(x[is_images])                                           # (images, classes)


BUGS = ("pad-mask-on-queries", "pooled-flattened-n-major")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 N=3",)


def build(bug="", B=2, T=6, D=32, H=4, N=3):
    torch.manual_seed(0)
    patch_dim = 3 * 2 * 2
    image_ids = torch.zeros(B, T, dtype=torch.long)
    lengths = torch.full((B,), T, dtype=torch.long)
    num_images = torch.full((B,), N, dtype=torch.long)
    for b in range(B):
        if b % 2 == 0:                                                               # N images filling the row
            image_ids[b] = torch.arange(T) * N // T
        else:                                                                        # N - 1 images, then padding
            lengths[b], num_images[b] = T - 2, N - 1
            image_ids[b, :T - 2] = torch.arange(T - 2) * (N - 1) // (T - 2)
    patches = torch.randn(B, T, patch_dim) * (torch.arange(T) < lengths[:, None])[..., None]
    positions = torch.randint(0, 5, (B, T, 2)) * (torch.arange(T) < lengths[:, None])[..., None]
    model = NaViT(patch_dim, D, H, bug=bug)
    return model.eval(), (patches, positions, image_ids, lengths, num_images)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

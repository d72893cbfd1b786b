"""facebookresearch/dinov3, dinov3/layers/attention.py (``rope_rotate_half``, ``rope_apply``, ``SelfAttention
.apply_rope``/``compute_attention``), dinov3/layers/rope_position_encoding.py (``RopePositionEmbedding``) and
dinov3/models/vision_transformer.py (``DinoVisionTransformer.prepare_tokens_with_masks``/``forward_features``):
DINOv3's attention with an axial 2-D rotary embedding. Patches from a stride-``p`` conv (``flatten(2).transpose(1,
2)``, ``reshape(-1, H, W, D)``, ``flatten(1, 2)``), then ``cat([cls_token, storage_tokens, x], dim=1)`` (one class
token and four register tokens in front); the table for the ``H x W`` patches only: coordinates ``arange(0.5, H) /
H`` (``normalize_coords="separate"``), ``torch.meshgrid(coords_h, coords_w, indexing="ij")``, ``flatten(0, 1)``,
mapped to ``[-1, 1]``, angles ``2 pi coords[:, :, None] / periods[None, None, :]`` ``flatten(1, 2)`` and ``tile(2)``
(``[HW, d]``: half-split pairs); ``qkv.reshape(B, N, 3, heads, C // heads)``, ``unbind(2)``, ``transpose(1, 2)``;
``prefix = N - sin.shape[-2]`` tokens left unrotated and joined back by ``torch.cat(..., dim=-2)``; SDPA;
``transpose(1, 2).reshape([B, N, C])``.

Bugs: ``k-rotated-from-q``: ``k = rope_apply(q[:, :, prefix:, :], sin, cos)`` (the line copied from the one above:
the patch keys become the rotated patch queries); ``meshgrid-xy``: ``torch.meshgrid(coords_h, coords_w,
indexing="xy")`` (the grid ``[W, H, 2]`` flattened column by column while the patches are flattened row by row:
each patch gets another patch's position); ``rotate-half-interleaved``: ``rope_rotate_half`` pairing neighbours
(``stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)``) while the table is tiled by halves (``tile(2)``), the
two rotary conventions mixed."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import Tensor, nn

N_STORAGE = 4


def rope_rotate_half(x: Tensor, bug="") -> Tensor:
    if bug == "rotate-half-interleaved":
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)        # bug: neighbours paired
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def rope_apply(x: Tensor, sin: Tensor, cos: Tensor, bug="") -> Tensor:
    return (x * cos) + (rope_rotate_half(x, bug) * sin)


class RopePositionEmbedding(nn.Module):
    def __init__(self, embed_dim, *, num_heads, base=100.0, bug=""):
        super().__init__()
        D_head = embed_dim // num_heads
        self.D_head, self.bug = D_head, bug
        periods = base ** (2 * torch.arange(D_head // 4, dtype=torch.float32) / (D_head // 2))  # [D//4]
        self.register_buffer("periods", periods, persistent=True)

    def forward(self, *, H: int, W: int):
        coords_h = torch.arange(0.5, H, dtype=torch.float32) / H                     # [H]
        coords_w = torch.arange(0.5, W, dtype=torch.float32) / W                     # [W]
        indexing = "xy" if self.bug == "meshgrid-xy" else "ij"
        coords = torch.stack(torch.meshgrid(coords_h, coords_w, indexing=indexing), dim=-1)  # [H, W, 2]
        coords = coords.flatten(0, 1)                                                # [HW, 2]
        coords = 2.0 * coords - 1.0
        angles = 2 * math.pi * coords[:, :, None] / self.periods[None, None, :]      # [HW, 2, D//4]
        angles = angles.flatten(1, 2)                                                # [HW, D//2]
        angles = angles.tile(2)                                                      # [HW, D]
        return (torch.sin(angles), torch.cos(angles))


class SelfAttention(nn.Module):
    def __init__(self, dim, num_heads=8, bug=""):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.bug = bug

    def apply_rope(self, q: Tensor, k: Tensor, rope):
        sin, cos = rope
        N = q.shape[-2]
        prefix = N - sin.shape[-2]
        assert prefix >= 0
        q_prefix = q[:, :, :prefix, :]
        q = rope_apply(q[:, :, prefix:, :], sin, cos, self.bug)                      # [B, head, hw, D//head]
        q = torch.cat((q_prefix, q), dim=-2)                                         # [B, head, N, D//head]
        k_prefix = k[:, :, :prefix, :]
        if self.bug == "k-rotated-from-q":
            k = rope_apply(q[:, :, prefix:, :], sin, cos, self.bug)                  # bug: q copied for k
        else:
            k = rope_apply(k[:, :, prefix:, :], sin, cos, self.bug)                  # [B, head, hw, D//head]
        k = torch.cat((k_prefix, k), dim=-2)                                         # [B, head, N, D//head]
        return q, k

    def forward(self, x: Tensor, rope=None) -> Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads)     # [B, N, 3, head, D//head]
        q, k, v = torch.unbind(qkv, 2)
        q, k, v = [t.transpose(1, 2) for t in [q, k, v]]                             # [B, head, N, D//head]
        if rope is not None:
            q, k = self.apply_rope(q, k, rope)
        x = F.scaled_dot_product_attention(q, k, v)                                  # [B, head, N, D//head]
        x = x.transpose(1, 2)                                                        # [B, N, head, D//head]
        return self.proj(x.reshape([B, N, C]))


class DinoVisionTransformer(nn.Module):
    def __init__(self, embed_dim=32, num_heads=4, patch_size=4, bug=""):
        super().__init__()
        self.embed_dim = embed_dim
        self.proj = nn.Conv2d(3, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02)
        self.storage_tokens = nn.Parameter(torch.randn(1, N_STORAGE, embed_dim) * 0.02)
        self.rope_embed = RopePositionEmbedding(embed_dim, num_heads=num_heads, bug=bug)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.attn = SelfAttention(embed_dim, num_heads, bug)

    def prepare_tokens(self, x):
        x = self.proj(x)                                                             # B C H W
        H, W = x.size(2), x.size(3)
        x = x.flatten(2).transpose(1, 2).reshape(-1, H, W, self.embed_dim)           # B H W C
        B = x.shape[0]
        x = x.flatten(1, 2)                                                          # B HW C
        x = torch.cat([self.cls_token.expand(B, -1, -1), self.storage_tokens.expand(B, -1, -1), x], dim=1)
        return x, (H, W)

    def forward(self, pixels):
        x, (H, W) = self.prepare_tokens(pixels)
        rope_sincos = self.rope_embed(H=H, W=W)
        return x + self.attn(self.norm1(x), rope=rope_sincos)


BUGS = ("k-rotated-from-q", "meshgrid-xy", "rotate-half-interleaved")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {DIMS[0]: "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):  # noqa: N803
    torch.manual_seed(0)
    return DinoVisionTransformer(D, H, bug=bug).eval(), (torch.randn(B, 3, 4 * Hp, 4 * Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

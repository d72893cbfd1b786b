"""huggingface/transformers, src/transformers/models/siglip2/modeling_siglip2.py (v4.50, ``Siglip2VisionEmbeddings``
with ``resize_positional_embeddings``, ``Siglip2Attention`` eager path, the ``_prepare_4d_attention_mask`` call of
``Siglip2VisionTransformer.forward``): SigLIP 2's NaFlex vision tower, native aspect ratios in one batch. Patches come
flattened ``[B, max_num_patches, C·p·p]`` with ``spatial_shapes [B, 2]`` (each image's patch grid ``(height,
width)``) and ``pixel_attention_mask [B, max_num_patches]`` (1 on real patches); the learnt ``position_embedding``
(a square ``16 × 16`` grid in the checkpoint) is reshaped ``(size, size, D)``, ``permute(2, 0, 1).unsqueeze(0)`` and,
per image, ``F.interpolate(..., size=(height, width), mode="bilinear", align_corners=False, antialias=True)``,
``reshape(embed_dim, height * width).transpose(0, 1)``, written into the first ``height·width`` rows (the padding
rows get row 0); the mask is expanded and inverted (``[B, 1, T, T]``, ``(1 - mask) · finfo.min``) and added to the
scores of an ordinary ``view(B, T, H, d).transpose(1, 2)`` attention with ``softmax(dim=-1, dtype=float32)``.

Bugs: ``spatial-shapes-wh``: ``width, height = spatial_shapes[i]`` (the pair read as ``(width, height)``, the PIL
order): the table is resized to the transposed grid and read row-major, every patch of a non-square image gets
another patch's position; ``reshape-no-transpose``: ``reshape(height * width, embed_dim)`` of the channel-first
``(1, D, h, w)`` result: each position vector made of one channel's values at several positions;
``mask-not-inverted``: ``pixel_attention_mask[:, None, None, :].to(dtype)`` added as it is (the 0/1 mask used as
the additive bias, the ``(1 - mask) · min`` step of ``_prepare_4d_attention_mask`` skipped): the padding attended."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class Siglip2VisionEmbeddings(nn.Module):
    def __init__(self, embed_dim, patch_dim, position_embedding_size, bug=""):
        super().__init__()
        self.bug, self.position_embedding_size = bug, position_embedding_size
        self.patch_embedding = nn.Linear(patch_dim, embed_dim)
        self.position_embedding = nn.Embedding(position_embedding_size ** 2, embed_dim)

    def resize_positional_embeddings(self, positional_embeddings, spatial_shapes, max_length):
        batch_size, embed_dim = spatial_shapes.shape[0], positional_embeddings.shape[-1]
        resulted = torch.empty((batch_size, max_length, embed_dim), dtype=positional_embeddings.dtype)
        positional_embeddings = positional_embeddings.permute(2, 0, 1).unsqueeze(0)    # (1, D, size, size)
        for i in range(batch_size):
            if self.bug == "spatial-shapes-wh":
                width, height = spatial_shapes[i].tolist()
            else:
                height, width = spatial_shapes[i].tolist()
            resized = F.interpolate(positional_embeddings, size=(height, width), mode="bilinear",
                                    align_corners=False, antialias=True)               # (1, D, h, w)
            if self.bug == "reshape-no-transpose":
                resized = resized.reshape(height * width, embed_dim)
            else:
                resized = resized.reshape(embed_dim, height * width).transpose(0, 1)  # (h·w, D)
            resulted[i, : height * width] = resized
            resulted[i, height * width:] = resized[0]
        return resulted                                                                # (B, T, D)

    def forward(self, pixel_values, spatial_shapes):
        patch_embeds = self.patch_embedding(pixel_values)                              # (B, T, D)
        size = self.position_embedding_size
        positional_embeddings = self.position_embedding.weight.reshape(size, size, -1)  # (size, size, D)
        return patch_embeds + self.resize_positional_embeddings(positional_embeddings, spatial_shapes,
                                                                max_length=pixel_values.shape[1])


class Siglip2Attention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.k_proj, self.v_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.q_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)

    def forward(self, hidden_states, attention_mask):
        B, T, D = hidden_states.shape
        q = self.q_proj(hidden_states).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)   # (B, H, T, d)
        k = self.k_proj(hidden_states).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)   # (B, H, T, d)
        v = self.v_proj(hidden_states).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)   # (B, H, T, d)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.scale + attention_mask          # (B, H, T, T)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()                  # (B, T, H, d)
        return self.out_proj(attn_output.reshape(B, T, D))                                       # (B, T, D)


class Siglip2VisionTransformer(nn.Module):
    def __init__(self, embed_dim, num_heads, patch_dim=12, position_embedding_size=4, bug=""):
        super().__init__()
        self.bug = bug
        self.embeddings = Siglip2VisionEmbeddings(embed_dim, patch_dim, position_embedding_size, bug)
        self.layer_norm1, self.self_attn = nn.LayerNorm(embed_dim), Siglip2Attention(embed_dim, num_heads)
        self.post_layernorm = nn.LayerNorm(embed_dim)

    def forward(self, pixel_values, pixel_attention_mask, spatial_shapes):
        hidden_states = self.embeddings(pixel_values, spatial_shapes)                  # (B, T, D)
        dtype, (B, T) = hidden_states.dtype, pixel_attention_mask.shape
        if self.bug == "mask-not-inverted":
            encoder_attention_mask = pixel_attention_mask[:, None, None, :].to(dtype)
        else:
            expanded = pixel_attention_mask[:, None, None, :].expand(B, 1, T, T).to(dtype)   # (B, 1, T, T)
            encoder_attention_mask = (1.0 - expanded).masked_fill((1.0 - expanded).bool(), torch.finfo(dtype).min)
        hidden_states = hidden_states + self.self_attn(self.layer_norm1(hidden_states), encoder_attention_mask)
        return self.post_layernorm(hidden_states)                                      # (B, T, D)


BUGS = ("spatial-shapes-wh", "reshape-no-transpose", "mask-not-inverted")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)   # (image 0 is Hp × Wp patches, image 1 (Hp - 1) × (Wp - 1), padded to Hp·Wp)
EQUAL = {DIMS[0]: "B=4 D=32 H=4 Hp=3 Wp=5"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):  # noqa: N803
    """Patchified images (``2 × 2`` patches of 3 channels: 12 values) of grids ``Hp × Wp`` (even images) and ``(Hp -
    1) × (Wp - 1)`` (odd ones), right-padded to ``Hp·Wp`` patches, with their mask and ``spatial_shapes``."""
    torch.manual_seed(0)
    spatial_shapes = torch.tensor([[Hp, Wp] if b % 2 == 0 else [Hp - 1, Wp - 1] for b in range(B)])
    lengths = spatial_shapes[:, 0] * spatial_shapes[:, 1]
    pixel_attention_mask = (torch.arange(Hp * Wp)[None, :] < lengths[:, None]).long()   # (B, T)
    pixel_values = torch.randn(B, Hp * Wp, 12) * pixel_attention_mask[..., None]
    model = Siglip2VisionTransformer(D, H, bug=bug)
    return model.eval(), (pixel_values, pixel_attention_mask, spatial_shapes)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""facebookresearch/mae, models_mae.py (https://github.com/facebookresearch/mae/blob/main/models_mae.py):
``MaskedAutoencoderViT.random_masking`` (noise, ``argsort`` twice for ``ids_shuffle`` and ``ids_restore``,
``gather`` with ``ids_keep``), ``forward_encoder`` (positions before masking, the class token after) and
``forward_decoder`` (mask tokens appended, ``gather`` with ``ids_restore`` to unshuffle, the class token
put back), with one timm ``Block``'s attention in the encoder.

Bug (argument): ``restore-wrong-axis``: the unshuffle gathers along the features
(``dim=2``) with the token order, the axis slip reported for MAE re-implementations."""

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, nH, N, d)
        attn = (q @ k.transpose(-2, -1)) * self.scale  # (B, nH, N, N)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)  # (B, N, C)
        return self.proj(x)


class MaskedAutoencoder(nn.Module):
    def __init__(self, img_size=16, patch_size=4, embed_dim=24, num_heads=3, decoder_dim=36, bug=""):
        super().__init__()
        self.bug = bug
        num_patches = (img_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(3, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, embed_dim) * 0.02)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.attn = Attention(embed_dim, num_heads)
        self.decoder_embed = nn.Linear(embed_dim, decoder_dim)
        self.mask_token = nn.Parameter(torch.randn(1, 1, decoder_dim) * 0.02)
        self.decoder_pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, decoder_dim) * 0.02)

    def random_masking(self, x, mask_ratio):
        N, L, D = x.shape  # batch, length, dim
        len_keep = int(L * (1 - mask_ratio))
        noise = torch.rand(N, L, device=x.device)  # noise in [0, 1]
        ids_shuffle = torch.argsort(noise, dim=1)  # ascend: small is keep, large is remove
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        ids_keep = ids_shuffle[:, :len_keep]
        x_masked = torch.gather(x, dim=1, index=ids_keep.unsqueeze(-1).repeat(1, 1, D))  # (N, len_keep, D)
        mask = torch.ones([N, L], device=x.device)
        mask[:, :len_keep] = 0
        mask = torch.gather(mask, dim=1, index=ids_restore)  # (N, L)
        return x_masked, mask, ids_restore

    def forward_encoder(self, imgs, mask_ratio):
        x = self.patch_embed(imgs).flatten(2).transpose(1, 2)  # (N, L, D)
        x = x + self.pos_embed[:, 1:, :]
        x, mask, ids_restore = self.random_masking(x, mask_ratio)
        cls_token = self.cls_token + self.pos_embed[:, :1, :]
        cls_tokens = cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)  # (N, 1+len_keep, D)
        x = x + self.attn(self.norm1(x))
        return x, mask, ids_restore

    def forward_decoder(self, x, ids_restore):
        x = self.decoder_embed(x)  # (N, 1+len_keep, D')
        mask_tokens = self.mask_token.repeat(x.shape[0], ids_restore.shape[1] + 1 - x.shape[1], 1)
        x_ = torch.cat([x[:, 1:, :], mask_tokens], dim=1)  # no cls token
        if self.bug == "restore-wrong-axis":
            x_ = torch.gather(x_, dim=2, index=ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))  # bug
        else:
            x_ = torch.gather(x_, dim=1, index=ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))  # unshuffle
        x = torch.cat([x[:, :1, :], x_], dim=1)  # append cls token
        return x + self.decoder_pos_embed

    def forward(self, imgs, mask_ratio=0.75):
        latent, mask, ids_restore = self.forward_encoder(imgs, mask_ratio)
        return self.forward_decoder(latent, ids_restore), mask


def build(bug=""):
    """--dims B=2,N=16,D=24,H=3 (16 × 16 pixels, 4 × 4 patches, 4 of 16 kept; decoder width 36)."""
    torch.manual_seed(0)
    return MaskedAutoencoder(bug=bug).eval(), (torch.randn(2, 3, 16, 16),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

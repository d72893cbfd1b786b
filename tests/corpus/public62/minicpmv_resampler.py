"""OpenBMB/MiniCPM-V, resampler.py of MiniCPM-Llama3-V 2.5 / MiniCPM-V 2.6 (``Resampler.forward``,
``_adjust_pos_cache``, ``get_2d_sincos_pos_embed``, ``_repeat``): a perceiver-style resampler for images of any
aspect ratio. Each image ``i`` of the batch has its own patch grid ``tgt_sizes[i] = (tgt_h, tgt_w)``; its patches are
right-padded to the batch's longest, ``key_padding_mask[i, patch_len[i]:] = True``; its 2-D sincos positions are cut
from the cache ``pos_embed[:tgt_h, :tgt_w, :].reshape((tgt_h * tgt_w, -1))`` and padded with ``pad_sequence(...,
batch_first=True).permute(1, 0, 2)`` (``BLD => L * B * D``); the keys ``x = ln_kv(kv_proj(x)).permute(1, 0, 2)``; the
learnt queries ``ln_q(self.query)`` repeated over the batch (``query.unsqueeze(1).repeat(1, N, 1)``: ``Q * B * D``)
attend through a sequence-first ``nn.MultiheadAttention(q, x + pos_embed, x, key_padding_mask=...)``; ``out.permute(1,
0, 2)``, ``ln_post``, ``@ proj``.

Bugs: ``tgt-hw-swapped``: ``pos_embed[:tgt_w, :tgt_h, :]`` (the grid's height and width swapped; the cache is square
so it runs): each patch gets the position of another (the transposed grid read row-major); ``padding-mask-left``:
``key_padding_mask[i, :max_patch_len - patch_len[i]] = True`` (the padding assumed on the left, as the language side
pads): the smaller image's first patches hidden and its padding attended."""

import sys

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence


def get_1d_sincos_pos_embed_from_grid(embed_dim, pos):
    omega = 1.0 / 10000 ** (np.arange(embed_dim // 2, dtype=np.float32) / (embed_dim / 2.0))
    out = np.einsum("hw,d->hwd", pos, omega)                                         # (H, W, D/2)
    return np.concatenate([np.sin(out), np.cos(out)], axis=-1)                       # (H, W, D)


def get_2d_sincos_pos_embed(embed_dim, image_size):
    grid_h_size, grid_w_size = image_size
    grid = np.meshgrid(np.arange(grid_w_size, dtype=np.float32), np.arange(grid_h_size, dtype=np.float32))
    emb_h = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0])              # (H, W, D/2)
    emb_w = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1])              # (H, W, D/2)
    return np.concatenate([emb_h, emb_w], axis=-1)                                   # (H, W, D)


class Resampler(nn.Module):
    def __init__(self, num_queries, embed_dim, num_heads, kv_dim, max_size=(8, 8), bug=""):
        super().__init__()
        self.bug, self.embed_dim = bug, embed_dim
        self.query = nn.Parameter(torch.randn(num_queries, embed_dim) * 0.02)
        self.kv_proj = nn.Linear(kv_dim, embed_dim, bias=False)
        self.attn = nn.MultiheadAttention(embed_dim, num_heads)
        self.ln_q, self.ln_kv, self.ln_post = nn.LayerNorm(embed_dim), nn.LayerNorm(embed_dim), nn.LayerNorm(embed_dim)
        self.proj = nn.Parameter((embed_dim ** -0.5) * torch.randn(embed_dim, embed_dim))
        pos_embed = torch.from_numpy(get_2d_sincos_pos_embed(embed_dim, max_size)).float()
        self.register_buffer("pos_embed", pos_embed, persistent=False)             # (max_h, max_w, D)

    def _repeat(self, query, N: int):
        return query.unsqueeze(1).repeat(1, N, 1)                                    # (Q, B, D)

    def forward(self, x, tgt_sizes):                                                 # (B, L, kv_dim), (B, 2)
        bs = x.shape[0]
        patch_len = tgt_sizes[:, 0] * tgt_sizes[:, 1]
        max_patch_len = torch.max(patch_len)
        key_padding_mask = torch.zeros((bs, max_patch_len), dtype=torch.bool)
        pos_embed = []
        for i in range(bs):
            tgt_h, tgt_w = tgt_sizes[i]
            if self.bug == "tgt-hw-swapped":
                pos_embed.append(self.pos_embed[:tgt_w, :tgt_h, :].reshape((tgt_h * tgt_w, -1)))
            else:
                pos_embed.append(self.pos_embed[:tgt_h, :tgt_w, :].reshape((tgt_h * tgt_w, -1)))   # (h·w, D)
            if self.bug == "padding-mask-left":
                key_padding_mask[i, :max_patch_len - patch_len[i]] = True
            else:
                key_padding_mask[i, patch_len[i]:] = True
        pos_embed = pad_sequence(pos_embed, batch_first=True, padding_value=0.0).permute(1, 0, 2)   # (L, B, D)
        x = self.kv_proj(x)                                                          # (B, L, D)
        x = self.ln_kv(x).permute(1, 0, 2)                                           # (L, B, D)
        q = self.ln_q(self.query)                                                    # (Q, D)
        out = self.attn(self._repeat(q, bs), x + pos_embed, x, key_padding_mask=key_padding_mask)[0]   # (Q, B, D)
        x = out.permute(1, 0, 2)                                                     # (B, Q, D)
        x = self.ln_post(x)
        return x @ self.proj                                                         # (B, Q, D)


BUGS = ("tgt-hw-swapped", "padding-mask-left")
TWINS = ()
DIMS = ("B=2 N=6 D=32 H=4 Hp=3 Wp=5",)   # (N: the learnt queries; image 0 is Hp × Wp, image 1 (Hp - 1) × (Wp - 1))
EQUAL = {DIMS[0]: "B=4 N=4 D=32 H=4 Hp=3 Wp=5"}


def build(bug="", B=2, N=6, D=32, H=4, Hp=3, Wp=5):  # noqa: N803
    """``B`` images' patch features (width 24, the vision tower's) right-padded to ``Hp·Wp`` patches: even images are
    ``Hp × Wp`` patches, odd ones ``(Hp - 1) × (Wp - 1)``."""
    torch.manual_seed(0)
    tgt_sizes = torch.tensor([[Hp, Wp] if b % 2 == 0 else [Hp - 1, Wp - 1] for b in range(B)])
    model = Resampler(N, D, H, 24, bug=bug)
    return model.eval(), (torch.randn(B, Hp * Wp, 24), tgt_sizes)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""black-forest-labs/flux ``src/flux/modules/layers.py`` (``DoubleStreamBlock``, ``SelfAttention``, ``QKNorm``,
``EmbedND``) and ``src/flux/math.py`` (``attention``, ``rope``, ``apply_rope``), with ``Flux.forward`` in
``src/flux/model.py`` (2024): the image tokens ``img [B, L_img, D]`` and the text tokens ``txt [B, L_txt, D]`` each
get their own ``qkv`` linear, ``rearrange(qkv, "B L (K H D) -> K B H L D", K=3, H=num_heads)`` and an RMS
``QKNorm``; the two streams joined text first, ``q = torch.cat((txt_q, img_q), dim=2)`` (and ``k``, ``v``); the
rotary table from ``ids = torch.cat((txt_ids, img_ids), dim=1)`` (text ids all zero, image ids ``(0, row,
col)``): ``EmbedND`` concatenates one ``rope(ids[..., i], axes_dim[i], theta)`` per axis (each ``[B, L, d_i/2, 2,
2]``, rotation matrices) along ``dim=-3`` and ``unsqueeze(1)`` for the heads; ``apply_rope`` reshapes ``q`` to
``[..., d/2, 1, 2]``, ``freqs_cis[..., 0] * x_[..., 0] + freqs_cis[..., 1] * x_[..., 1]``; ``F.scaled_dot_product_
attention``; ``rearrange(x, "B H L D -> B L (H D)")``; split back ``attn[:, :txt.shape[1]], attn[:, txt.shape[1]:]``;
each stream's ``proj`` and residual (the modulation left out).

Bugs: ``ids-image-first``: ``ids = torch.cat((img_ids, txt_ids), dim=1)`` while the tokens are joined text first
(the rotary table laid over the wrong tokens: text tokens rotated by image rows and columns, the first image tokens
by the text's zeros); ``qkv-heads-outer``: ``rearrange(qkv, "B L (H K D) -> K B H L D")`` on a ``qkv`` linear laid
out ``(K H D)`` (each "query" head holds a slice of queries, keys and values of other heads)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

BUGS = ("ids-image-first", "qkv-heads-outer")
TWINS = ()
DIMS = ("B=2 T=6 S=5 D=32 H=4",)
AXES_DIM = (2, 2, 4)


def rope(pos, dim, theta):
    scale = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    omega = 1.0 / (theta ** scale)                                                   # (d_i/2,)
    out = torch.einsum("...n,d->...nd", pos.to(torch.float64), omega)                # (B, L, d_i/2)
    out = torch.stack([torch.cos(out), -torch.sin(out), torch.sin(out), torch.cos(out)], dim=-1)   # (B, L, d_i/2, 4)
    out = rearrange(out, "b n d (i j) -> b n d i j", i=2, j=2)                       # (B, L, d_i/2, 2, 2)
    return out.float()


def apply_rope(xq, xk, freqs_cis):
    xq_ = xq.float().reshape(*xq.shape[:-1], -1, 1, 2)                               # (B, H, L, d/2, 1, 2)
    xk_ = xk.float().reshape(*xk.shape[:-1], -1, 1, 2)
    xq_out = freqs_cis[..., 0] * xq_[..., 0] + freqs_cis[..., 1] * xq_[..., 1]        # (B, H, L, d/2, 2)
    xk_out = freqs_cis[..., 0] * xk_[..., 0] + freqs_cis[..., 1] * xk_[..., 1]
    return xq_out.reshape(*xq.shape).type_as(xq), xk_out.reshape(*xk.shape).type_as(xk)   # (B, H, L, d)


def attention(q, k, v, pe):
    q, k = apply_rope(q, k, pe)
    x = F.scaled_dot_product_attention(q, k, v)                                      # (B, H, L, d)
    return rearrange(x, "B H L D -> B L (H D)")                                      # (B, L, D)


class EmbedND(nn.Module):
    def __init__(self, dim, theta, axes_dim):
        super().__init__()
        self.dim, self.theta, self.axes_dim = dim, theta, axes_dim

    def forward(self, ids):
        n_axes = ids.shape[-1]
        emb = torch.cat([rope(ids[..., i], self.axes_dim[i], self.theta) for i in range(n_axes)],
                        dim=-3)                                                      # (B, L, d/2, 2, 2)
        return emb.unsqueeze(1)                                                      # (B, 1, L, d/2, 2, 2)


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        rrms = torch.rsqrt(torch.mean(x.float() ** 2, dim=-1, keepdim=True) + 1e-6)
        return (x.float() * rrms).to(x.dtype) * self.scale


class QKNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.query_norm, self.key_norm = RMSNorm(dim), RMSNorm(dim)

    def forward(self, q, k, v):
        return self.query_norm(q).to(v), self.key_norm(k).to(v)


class SelfAttention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.norm = QKNorm(dim // num_heads)
        self.proj = nn.Linear(dim, dim)


class DoubleStreamBlock(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.img_norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.img_attn = SelfAttention(hidden_size, num_heads)
        self.txt_norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.txt_attn = SelfAttention(hidden_size, num_heads)

    def split_qkv(self, qkv):
        if self.bug == "qkv-heads-outer":
            return rearrange(qkv, "B L (H K D) -> K B H L D", K=3, H=self.num_heads)   # (3, B, H, L, d)
        return rearrange(qkv, "B L (K H D) -> K B H L D", K=3, H=self.num_heads)       # (3, B, H, L, d)

    def forward(self, img, txt, pe):
        img_qkv = self.img_attn.qkv(self.img_norm1(img))                             # (B, T, 3D)
        img_q, img_k, img_v = self.split_qkv(img_qkv)                                # (B, H, T, d) each
        img_q, img_k = self.img_attn.norm(img_q, img_k, img_v)
        txt_qkv = self.txt_attn.qkv(self.txt_norm1(txt))                             # (B, S, 3D)
        txt_q, txt_k, txt_v = self.split_qkv(txt_qkv)                                # (B, H, S, d) each
        txt_q, txt_k = self.txt_attn.norm(txt_q, txt_k, txt_v)

        q = torch.cat((txt_q, img_q), dim=2)                                         # (B, H, S + T, d)
        k = torch.cat((txt_k, img_k), dim=2)
        v = torch.cat((txt_v, img_v), dim=2)
        attn = attention(q, k, v, pe=pe)                                             # (B, S + T, D)
        txt_attn, img_attn = attn[:, : txt.shape[1]], attn[:, txt.shape[1]:]         # (B, S, D), (B, T, D)
        img = img + self.img_attn.proj(img_attn)
        txt = txt + self.txt_attn.proj(txt_attn)
        return img, txt


class FluxSketch(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.pe_embedder = EmbedND(hidden_size // num_heads, 10_000, AXES_DIM)
        self.block = DoubleStreamBlock(hidden_size, num_heads, bug)

    def forward(self, img, img_ids, txt, txt_ids):
        if self.bug == "ids-image-first":
            ids = torch.cat((img_ids, txt_ids), dim=1)                               # (B, T + S, 3)
        else:
            ids = torch.cat((txt_ids, img_ids), dim=1)                               # (B, S + T, 3)
        pe = self.pe_embedder(ids)
        return self.block(img, txt, pe)


def build(bug="", B=2, T=6, S=5, D=32, H=4):
    torch.manual_seed(0)
    h, w = 2, T // 2                                                                 # the latent's patch grid
    img_ids = torch.zeros(h, w, 3)
    img_ids[..., 1] = img_ids[..., 1] + torch.arange(h)[:, None]
    img_ids[..., 2] = img_ids[..., 2] + torch.arange(w)[None, :]
    img_ids = img_ids.reshape(1, h * w, 3).repeat(B, 1, 1)                           # (B, T, 3)
    txt_ids = torch.zeros(B, S, 3)                                                   # (B, S, 3)
    inputs = (torch.randn(B, T, D), img_ids, torch.randn(B, S, D), txt_ids)
    return FluxSketch(D, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

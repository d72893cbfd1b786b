"""SWivid/F5-TTS, src/f5_tts/model/backbones/dit.py (v1.0, ``DiT``, ``TextEmbedding``, ``InputEmbedding``,
``DiTBlock``) and src/f5_tts/model/modules.py (``Attention`` with ``pe_attn_head``, ``AttnProcessor``,
``AdaLayerNormZero``, ``ConvPositionEmbedding``, ``TimestepEmbedding``), with x-transformers' ``RotaryEmbedding``
and ``apply_rotary_pos_emb``: the flow-matching DiT of F5-TTS over mel frames. The text ids are shifted by one,
padded with 0 (the filler) to the mel length and embedded; the noisy mel, the masked-audio condition and the text
embedding are concatenated per frame and projected (``InputEmbedding``), a grouped ``Conv1d`` position embedding
added (``permute(0, 2, 1)`` around it, padded frames zeroed). In each block (adaLN-zero from the timestep): ``to_q``,
``to_k``, ``to_v``, ``view(batch_size, -1, heads, head_dim).transpose(1, 2)``, rotary (interleaved pairs, table
``stack((freqs, freqs), -1)``) applied to the first ``pe_attn_head`` heads only (``query[:, :pn, :, :] =
apply_rotary_pos_emb(query[:, :pn, :, :], ...)``, 1 for the v0 checkpoints), the frame mask ``'b n -> b 1 1 n'``
expanded to ``(batch, heads, n, n)``, ``scaled_dot_product_attention``, ``transpose(1, 2).reshape(batch_size, -1,
heads * head_dim)``, ``to_out``, padded frames zeroed.

Bugs: ``rope-heads-on-frames``: the ``pe_attn_head`` slice taken on dim 2, ``query[:, :, :pn]`` (the frames of
the ``(b, h, n, d)`` layout, as if it were ``(b, n, h, d)``: the first frame of every head rotated, at the last
position, the rest not rotated at all); ``mask-on-queries``: the mask expanded from ``unsqueeze(1).unsqueeze(-1)``
(``b 1 n 1``: padded frames hidden as queries, every frame still attends the padded ones)."""

import math
import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

TEXT_VOCAB, MEL = 20, 10


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1. / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward_from_seq_len(self, seq_len):
        t = rearrange(torch.arange(seq_len), "n -> 1 n")
        freqs = torch.einsum("b i , j -> b i j", t.type_as(self.inv_freq), self.inv_freq)   # (1, n, d/2)
        freqs = torch.stack((freqs, freqs), dim=-1)
        return rearrange(freqs, "... d r -> ... (d r)"), 1.                         # (1, n, d)


def rotate_half(x):
    x = rearrange(x, "... (d r) -> ... d r", r=2)
    x1, x2 = x.unbind(dim=-1)
    return rearrange(torch.stack((-x2, x1), dim=-1), "... d r -> ... (d r)")


def apply_rotary_pos_emb(t, freqs, scale=1):
    rot_dim, seq_len = freqs.shape[-1], t.shape[-2]
    freqs = freqs[:, -seq_len:, :]
    if t.ndim == 4 and freqs.ndim == 3:
        freqs = rearrange(freqs, "b n d -> b 1 n d")
    t, t_unrotated = t[..., :rot_dim], t[..., rot_dim:]
    t = (t * freqs.cos() * scale) + (rotate_half(t) * freqs.sin() * scale)
    return torch.cat((t, t_unrotated), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, heads, pe_attn_head=1, bug=""):
        super().__init__()
        self.heads, self.pe_attn_head, self.bug = heads, pe_attn_head, bug
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.to_out = nn.ModuleList([nn.Linear(dim, dim), nn.Dropout(0.0)])

    def forward(self, x, mask, rope):                                              # (b, n, d), (b, n)
        batch_size = x.shape[0]
        query, key, value = self.to_q(x), self.to_k(x), self.to_v(x)
        head_dim = key.shape[-1] // self.heads
        query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)   # (b, h, n, d_h)
        key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        freqs, xpos_scale = rope
        pn = self.pe_attn_head
        if self.bug == "rope-heads-on-frames":
            query[:, :, :pn] = apply_rotary_pos_emb(query[:, :, :pn], freqs, xpos_scale)
            key[:, :, :pn] = apply_rotary_pos_emb(key[:, :, :pn], freqs, xpos_scale)
        else:
            query[:, :pn, :, :] = apply_rotary_pos_emb(query[:, :pn, :, :], freqs, xpos_scale)
            key[:, :pn, :, :] = apply_rotary_pos_emb(key[:, :pn, :, :], freqs, xpos_scale)
        if self.bug == "mask-on-queries":
            attn_mask = mask.unsqueeze(1).unsqueeze(-1)                            # (b, 1, n, 1)
        else:
            attn_mask = mask.unsqueeze(1).unsqueeze(1)                             # 'b n -> b 1 1 n'
        attn_mask = attn_mask.expand(batch_size, self.heads, query.shape[-2], key.shape[-2])
        x = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)   # (b, h, n, d_h)
        x = x.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)       # (b, n, d)
        x = self.to_out[1](self.to_out[0](x))
        return x.masked_fill(~mask.unsqueeze(-1), 0.0)


class DiT(nn.Module):
    def __init__(self, dim, heads, freq_embed_dim=16, bug=""):
        super().__init__()
        self.freq_embed_dim = freq_embed_dim
        self.time_mlp = nn.Sequential(nn.Linear(freq_embed_dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.text_embed = nn.Embedding(TEXT_VOCAB + 1, dim)
        self.proj = nn.Linear(MEL * 2 + dim, dim)
        self.conv1d = nn.Sequential(nn.Conv1d(dim, dim, 31, groups=16, padding=15), nn.Mish())
        self.rotary_embed = RotaryEmbedding(dim // heads)
        self.attn_norm = nn.Sequential(nn.SiLU(), nn.Linear(dim, dim * 6))
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads, bug=bug)
        self.proj_out = nn.Linear(dim, MEL)

    def forward(self, x, cond, text, time, mask):                                 # (b, n, mel), (b, nt), (b,), (b, n)
        seq_len = x.shape[1]
        half_dim = self.freq_embed_dim // 2
        emb = torch.exp(torch.arange(half_dim).float() * -(math.log(10000) / (half_dim - 1)))
        emb = 1000 * time.unsqueeze(1) * emb.unsqueeze(0)                          # (b, f/2)
        t = self.time_mlp(torch.cat((emb.sin(), emb.cos()), dim=-1))               # (b, d)
        text = F.pad((text + 1)[:, :seq_len], (0, seq_len - text.shape[1]), value=0)   # (b, n), 0 = filler
        x = self.proj(torch.cat((x, cond, self.text_embed(text)), dim=-1))         # (b, n, d)
        x_masked = x.masked_fill(~mask[..., None], 0.0).permute(0, 2, 1)           # (b, d, n)
        x = self.conv1d(x_masked).permute(0, 2, 1).masked_fill(~mask[..., None], 0.0) + x
        rope = self.rotary_embed.forward_from_seq_len(seq_len)
        shift_msa, scale_msa, gate_msa, _, _, _ = torch.chunk(self.attn_norm(t), 6, dim=1)
        norm = self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        x = x + gate_msa.unsqueeze(1) * self.attn(norm, mask, rope)
        return self.proj_out(x)                                                    # (b, n, mel)


BUGS = ("rope-heads-on-frames", "mask-on-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=6, D=32, H=4):  # noqa: N803
    """``T`` mel frames (every other clip two frames shorter, padded), 3 text ids, one flow time per clip."""
    torch.manual_seed(0)
    lens = torch.tensor([T if b % 2 == 0 else T - 2 for b in range(B)])
    mask = torch.arange(T)[None, :] < lens[:, None]                                # (b, n), True = frame
    inputs = (torch.randn(B, T, MEL), torch.randn(B, T, MEL), torch.randint(0, TEXT_VOCAB, (B, 3)), torch.rand(B), mask)
    return DiT(D, H, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

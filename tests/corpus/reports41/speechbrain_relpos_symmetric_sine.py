"""speechbrain/speechbrain issue #3070 ("make_pe() in class RelPosEncXL", labelled bug; the reporter: "Why are
sinusoids the same for past and future when sin() is odd and cos() is even?", citing ESPnet's ``pe_negative[:,
0::2] = torch.sin(-1 * position * div_term)``; yentur, who opened #3073 for it: "Your reading is right: the sine
terms should be negated for the negative positions, and ``rel_shift`` does read those rows, so a non-causal encoder
currently gets the same positional bias for a key ``d`` steps ahead as for one ``d`` steps behind"; the fix keeps
the old table behind ``use_legacy_symmetric=True`` for the released checkpoints): speechbrain/nnet/attention.py
``RelPosEncXL.make_pe`` wrote ``pe_future[:, 0::2] = sinusoids  # same for past and future``.

The idiom (speechbrain's ``RelPosEncXL`` and ``RelPosMHAXL`` in a pre-norm conformer-style layer): the table
``(1, 2T - 1, D)``, row ``i`` the relative position ``T - 1 - i`` (``pe_past`` flipped, then ``pe_future[1:]``);
``in_proj_weight`` ``(3D, D)`` applied with ``F.linear`` and ``view(B, -1, H, 3 * d).chunk(3, dim=-1)``;
``linear_pos`` on the table ``view(1, -1, H, d)``; ``pos_bias_u``/``pos_bias_v`` (stored ``(d, H)``, read
``view(1, 1, H, d)``) added to the queries, each ``transpose(1, 2)``; ``matrix_ac`` against ``key.permute(0, 2, 3,
1)``, ``matrix_bd`` against ``p_k.permute(0, 2, 3, 1)`` and ``rel_shift`` (pad a zero column on the left, view
``(b, h, t2 + 1, t1)``, drop the first row, keep ``pos_len // 2 + 1`` columns); ``self.scale = 1 /
sqrt(embed_dim)`` (speechbrain's own, applied before the products); the key padding mask ``(B, 1, 1, T)`` filled
with ``-inf`` before the softmax and 0 after; the heads merged with ``transpose(1, 2).contiguous().view(B, -1,
H * d)`` and ``out_proj``.

Bugs (argument): ``legacy-symmetric``: ``pe_future[:, 0::2] = sinusoids`` (the code of #3070: a key ahead and a
key behind the query get the same positional term); ``past-not-flipped``: ``pe_past`` left in increasing order
(row ``i`` then holds relative position ``i`` where ``rel_shift`` reads ``T - 1 - i``)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("legacy-symmetric", "past-not-flipped")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class RelPosEncXL(nn.Module):
    def __init__(self, emb_dim, bug=""):
        super().__init__()
        self.emb_dim, self.bug = emb_dim, bug
        inv_freq = torch.exp(torch.arange(0, emb_dim, 2, dtype=torch.float32) * -(math.log(10000.0) / emb_dim))
        self.register_buffer("inv_freq", inv_freq)

    @torch.no_grad()
    def make_pe(self, seq_len):
        tot_pe = torch.empty((2, seq_len, self.emb_dim), dtype=torch.float32)
        pe_past, pe_future = tot_pe[0], tot_pe[1]
        positions = torch.arange(0, seq_len, dtype=torch.float32).unsqueeze(-1)      # (T, 1)
        sinusoids = torch.sin(positions * self.inv_freq)                             # (T, D/2)
        cosinusoids = torch.cos(positions * self.inv_freq)
        pe_past[:, 0::2] = sinusoids
        pe_past[:, 1::2] = cosinusoids
        pe_future[:, 0::2] = sinusoids if self.bug == "legacy-symmetric" else -sinusoids
        pe_future[:, 1::2] = cosinusoids
        if self.bug != "past-not-flipped":
            pe_past = torch.flip(pe_past, (0,))
        pe_past = pe_past.unsqueeze(0)                                               # (1, T, D)
        pe_future = pe_future[1:].unsqueeze(0)                                       # (1, T-1, D)
        return torch.cat([pe_past, pe_future], dim=1)                                # (1, 2T-1, D)

    def forward(self, x):
        return self.make_pe(seq_len=x.size(1))


class RelPosMHAXL(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.linear_pos = nn.Linear(embed_dim, embed_dim, bias=False)
        self.pos_bias_u = nn.Parameter(torch.empty(self.head_dim, self.num_heads))
        self.pos_bias_v = nn.Parameter(torch.empty(self.head_dim, self.num_heads))
        for p in (self.in_proj_weight, self.pos_bias_u, self.pos_bias_v):
            nn.init.xavier_uniform_(p)
        self.scale = 1 / math.sqrt(self.embed_dim)

    def rel_shift(self, x):
        b, h, qlen, pos_len = x.size()                                               # (B, H, T, 2T-1)
        x = F.pad(x, pad=(1, 0))                                                     # (B, H, T, 2T)
        x = x.view(b, h, -1, qlen)                                                   # (B, H, 2T, T)
        x = x[:, :, 1:].view(b, h, qlen, pos_len)                                    # (B, H, T, 2T-1)
        return x[..., : pos_len // 2 + 1]                                            # (B, H, T, T)

    def forward(self, x, pos_embs, key_padding_mask):                                # (B, T, D), (1, 2T-1, D)
        bsz, klen = x.shape[0], x.shape[1]
        query, key, value = F.linear(x, self.in_proj_weight).view(
            bsz, -1, self.num_heads, self.head_dim * 3).chunk(3, dim=-1)              # (B, T, H, d)
        p_k = self.linear_pos(pos_embs).view(1, -1, self.num_heads, self.head_dim)   # (1, 2T-1, H, d)
        q_with_bias_u = (query + self.pos_bias_u.view(1, 1, self.num_heads, self.head_dim)).transpose(1, 2)
        q_with_bias_v = (query + self.pos_bias_v.view(1, 1, self.num_heads, self.head_dim)).transpose(1, 2)
        matrix_ac = torch.matmul(q_with_bias_u * self.scale, key.permute(0, 2, 3, 1))   # (B, H, T, T)
        matrix_bd = torch.matmul(q_with_bias_v * self.scale, p_k.permute(0, 2, 3, 1))   # (B, H, T, 2T-1)
        attn_score = matrix_ac + self.rel_shift(matrix_bd)                           # (B, H, T, T)
        attn_score = attn_score.masked_fill(key_padding_mask.view(bsz, 1, 1, klen), -float("inf"))
        attn_score = F.softmax(attn_score, dim=-1, dtype=torch.float32)
        attn_score = attn_score.masked_fill(key_padding_mask.view(bsz, 1, 1, klen), 0.0)
        out = torch.matmul(attn_score, value.transpose(1, 2))                        # (B, H, T, d)
        out = out.transpose(1, 2).contiguous().view(bsz, -1, self.head_dim * self.num_heads)  # (B, T, D)
        return self.out_proj(out)


class ConformerLayer(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.pos_enc = RelPosEncXL(d_model, bug)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.mha_layer = RelPosMHAXL(d_model, nhead)
        self.ffn = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.SiLU(), nn.Linear(4 * d_model, d_model))

    def forward(self, src, lengths):                                                 # (B, T, D), (B,)
        key_padding_mask = torch.arange(src.size(1))[None, :] >= lengths[:, None]    # (B, T), True = pad
        pos_embs = self.pos_enc(src)
        src = src + self.mha_layer(self.norm1(src), pos_embs, key_padding_mask)
        return src + self.ffn(self.norm2(src))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    lengths = torch.tensor([T] + [T - 2] * (B - 1))
    return ConformerLayer(D, H, bug).eval(), (torch.randn(B, T, D), lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

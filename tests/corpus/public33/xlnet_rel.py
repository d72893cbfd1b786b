"""transformers, src/transformers/models/xlnet/modeling_xlnet.py (v4.46, ``XLNetRelativeAttention``
``rel_shift_bnij``/``rel_attn_core``/``post_attention``, ``XLNetModel.relative_positional_encoding``): XLNet's
time-major relative attention (content stream only, no memory). The ids are transposed to ``(T, B)``; the
sinusoidal relative encoding over ``arange(klen, -qlen, -1)`` (``2 T`` positions), ``cat(sin, cos)``,
``[:, None, :].expand(-1, B, -1)``; projections are ``(D, H, d)`` parameters read by ``einsum("ibh,hnd->ibnd")``;
``ac = einsum("ibnd,jbnd->bnij", q + r_w_bias, k)``, ``bd = einsum("ibnd,jbnd->bnij", q + r_r_bias, k_r)`` shifted by
``rel_shift_bnij`` (reshape to ``(B, H, 2T, T)``, drop the first row, reshape back, ``index_select`` the first
``klen`` columns); ``(ac + bd) * scale``, the padding mask ``(T_q=1, T_k, B, 1)`` read by ``einsum("ijbn->bnij")``
and subtracted times ``1e30``; ``softmax(dim=3)``, ``einsum("bnij,jbnd->ibnd")`` with v, ``einsum("ibnd,hnd->ibh")``
with o, the residual and a LayerNorm.

Bugs: ``content-scores-ji``: the content term ``einsum("ibnd,jbnd->bnji")`` (the subscripts of the output swapped,
a natural slip with four-letter einsum strings: the content scores come out keys-by-queries and are summed with
the position scores queries-by-keys); ``mask-over-queries``: the mask read ``einsum("ijbn->bnji")`` (a natural
slip: the padding mask lands on the queries' axis, padded keys seen)."""

import sys

import torch
from torch import nn


class XLNetRelativeAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.n_head, self.d_head, self.bug = heads, dim // heads, bug
        self.scale = 1 / (self.d_head**0.5)
        for name in ("q", "k", "v", "o", "r"):
            setattr(self, name, nn.Parameter(torch.randn(dim, heads, self.d_head) * 0.02))
        self.r_r_bias = nn.Parameter(torch.randn(heads, self.d_head) * 0.02)
        self.r_w_bias = nn.Parameter(torch.randn(heads, self.d_head) * 0.02)
        self.layer_norm = nn.LayerNorm(dim)

    @staticmethod
    def rel_shift_bnij(x, klen=-1):
        x_size = x.shape
        x = x.reshape(x_size[0], x_size[1], x_size[3], x_size[2])
        x = x[:, :, 1:, :]
        x = x.reshape(x_size[0], x_size[1], x_size[2], x_size[3] - 1)
        return torch.index_select(x, 3, torch.arange(klen, device=x.device, dtype=torch.long))

    def rel_attn_core(self, q_head, k_head_h, v_head_h, k_head_r, attn_mask):
        content = "ibnd,jbnd->bnji" if self.bug == "content-scores-ji" else "ibnd,jbnd->bnij"
        ac = torch.einsum(content, q_head + self.r_w_bias, k_head_h)
        bd = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_r_bias, k_head_r)
        bd = self.rel_shift_bnij(bd, klen=ac.shape[3])
        attn_score = (ac + bd) * self.scale
        mask = "ijbn->bnji" if self.bug == "mask-over-queries" else "ijbn->bnij"
        attn_score = attn_score - 1e30 * torch.einsum(mask, attn_mask)
        attn_prob = nn.functional.softmax(attn_score, dim=3)
        return torch.einsum("bnij,jbnd->ibnd", attn_prob, v_head_h)

    def post_attention(self, h, attn_vec):
        attn_out = torch.einsum("ibnd,hnd->ibh", attn_vec, self.o)
        return self.layer_norm(attn_out + h)

    def forward(self, h, attn_mask, r):
        k_head_h = torch.einsum("ibh,hnd->ibnd", h, self.k)
        v_head_h = torch.einsum("ibh,hnd->ibnd", h, self.v)
        k_head_r = torch.einsum("ibh,hnd->ibnd", r, self.r)
        q_head_h = torch.einsum("ibh,hnd->ibnd", h, self.q)
        attn_vec = self.rel_attn_core(q_head_h, k_head_h, v_head_h, k_head_r, attn_mask)
        return self.post_attention(h, attn_vec)


class XLNetModel(nn.Module):
    def __init__(self, vocab, dim, heads, bug=""):
        super().__init__()
        self.d_model = dim
        self.word_embedding = nn.Embedding(vocab, dim)
        self.rel_attn = XLNetRelativeAttention(dim, heads, bug)

    @staticmethod
    def positional_embedding(pos_seq, inv_freq, bsz):
        sinusoid_inp = torch.einsum("i,d->id", pos_seq, inv_freq)
        pos_emb = torch.cat([torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)], dim=-1)
        return pos_emb[:, None, :].expand(-1, bsz, -1)

    def relative_positional_encoding(self, qlen, klen, bsz):
        freq_seq = torch.arange(0, self.d_model, 2.0, dtype=torch.float)
        inv_freq = 1 / torch.pow(10000, (freq_seq / self.d_model))
        fwd_pos_seq = torch.arange(klen, -qlen, -1.0)
        return self.positional_embedding(fwd_pos_seq, inv_freq, bsz)

    def forward(self, input_ids, attention_mask):
        input_ids = input_ids.transpose(0, 1).contiguous()                  # (T, B)
        qlen, bsz = input_ids.shape
        input_mask = 1.0 - attention_mask.transpose(0, 1).contiguous().float()
        data_mask = input_mask[None]                                        # (1, T, B)
        attn_mask = (data_mask[:, :, :, None] > 0).float()                  # (1, T, B, 1)
        word_emb_k = self.word_embedding(input_ids)
        pos_emb = self.relative_positional_encoding(qlen, qlen, bsz)
        output_h = self.rel_attn(word_emb_k, attn_mask, pos_emb)
        return output_h.permute(1, 0, 2).contiguous()


BUGS = ("content-scores-ji", "mask-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(0, 40, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, :2] = 0                                                # series 0 left-padded (XLNet pads left)
    return XLNetModel(40, D, H, bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""kimiyoung/transformer-xl, pytorch/mem_transformer.py (``RelPartialLearnableMultiHeadAttn``,
``PositionalEmbedding``, ``_rel_shift``; https://github.com/kimiyoung/transformer-xl): sequence-first
``(qlen, bsz, d_model)``; one ``qkv_net`` chunked in three and viewed ``(T, B, H, d_k)``; relative
positions ``arange(klen - 1, -1, -1.0)`` through a sinusoid ``torch.ger`` table ``(R, 1, D)``; content
and position scores ``einsum('ibnd,jbnd->ijbn')`` and ``einsum('ibnd,jnd->ijbn')``; ``_rel_shift`` by
padding a zero column on axis 1 and viewing ``(R + 1, T, B, H)``; the causal mask ``triu(ones(T, T),
1)[:, :, None]`` applied ``masked_fill(mask[:, :, :, None], -inf)``; softmax over ``dim=1`` (the keys of
``ijbn``); the merge ``einsum('ijbn,jbnd->ibnd')`` then ``view(T, B, H * d_k)``.

Bugs (argument): ``softmax-queries``: ``F.softmax(attn_score, dim=0)``: normalised over the queries,
the habit of ``(b, n, i, j)`` code where dim=-1 is the keys carried into the ``ijbn`` layout
(``dim=1`` in mem_transformer.py); ``shift-batch``: the zero
column padded on axis 2 (the batch) and the view taken over the batch: each query's position scores
come from another sequence of the batch."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("softmax-queries", "shift-batch")
DIMS = ("B=2 T=6 D=32 H=4",)


class PositionalEmbedding(nn.Module):
    def __init__(self, demb):
        super().__init__()
        inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0) / demb))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, pos_seq):
        sinusoid_inp = torch.ger(pos_seq, self.inv_freq)  # (R, D/2)
        pos_emb = torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)  # (R, D)
        return pos_emb[:, None, :]  # (R, 1, D)


class RelPartialLearnableMultiHeadAttn(nn.Module):
    def __init__(self, n_head=4, d_model=32, bug=""):
        super().__init__()
        self.n_head, self.d_head, self.bug = n_head, d_model // n_head, bug
        self.qkv_net = nn.Linear(d_model, 3 * n_head * self.d_head, bias=False)
        self.r_net = nn.Linear(d_model, n_head * self.d_head, bias=False)
        self.o_net = nn.Linear(n_head * self.d_head, d_model, bias=False)
        self.scale = 1 / (self.d_head**0.5)

    def _rel_shift(self, x):
        if self.bug == "shift-batch":
            zero_pad = torch.zeros((x.size(0), x.size(1), 1, *x.size()[3:]), dtype=x.dtype)  # bug: axis 2
            x_padded = torch.cat([zero_pad, x], dim=2)  # (T, R, B + 1, H)
            x_padded = x_padded.view(x.size(0), x.size(2) + 1, x.size(1), *x.size()[3:])
            return x_padded[:, 1:].reshape_as(x)  # (T, R, B, H)
        zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), dtype=x.dtype)  # (T, 1, B, H)
        x_padded = torch.cat([zero_pad, x], dim=1)  # (T, R + 1, B, H)
        x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])  # (R + 1, T, B, H)
        return x_padded[1:].view_as(x)  # (T, R, B, H)

    def forward(self, w, r, r_w_bias, r_r_bias, attn_mask=None):
        qlen, rlen, bsz = w.size(0), r.size(0), w.size(1)
        w_heads = self.qkv_net(w)  # (T, B, 3·D)
        r_head_k = self.r_net(r)  # (R, 1, D)
        w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
        klen = w_head_k.size(0)
        w_head_q = w_head_q.view(qlen, bsz, self.n_head, self.d_head)  # (T, B, H, d_k)
        w_head_k = w_head_k.view(klen, bsz, self.n_head, self.d_head)  # (T, B, H, d_k)
        w_head_v = w_head_v.view(klen, bsz, self.n_head, self.d_head)  # (T, B, H, d_k)
        r_head_k = r_head_k.view(rlen, self.n_head, self.d_head)  # (R, H, d_k)
        rw_head_q = w_head_q + r_w_bias  # (T, B, H, d_k)
        AC = torch.einsum("ibnd,jbnd->ijbn", (rw_head_q, w_head_k))  # (T, T, B, H)
        rr_head_q = w_head_q + r_r_bias
        BD = torch.einsum("ibnd,jnd->ijbn", (rr_head_q, r_head_k))  # (T, R, B, H)
        BD = self._rel_shift(BD)
        attn_score = AC + BD
        attn_score.mul_(self.scale)
        attn_score = attn_score.float().masked_fill(attn_mask[:, :, :, None], -float("inf")).type_as(attn_score)
        attn_prob = F.softmax(attn_score, dim=0 if self.bug == "softmax-queries" else 1)  # over j (keys)
        attn_vec = torch.einsum("ijbn,jbnd->ibnd", (attn_prob, w_head_v))  # (T, B, H, d_k)
        attn_vec = attn_vec.contiguous().view(attn_vec.size(0), attn_vec.size(1), self.n_head * self.d_head)
        return w + self.o_net(attn_vec)  # (T, B, D)


class MemTransformerLayer(nn.Module):
    def __init__(self, d_model=32, n_head=4, bug=""):
        super().__init__()
        self.pos_emb = PositionalEmbedding(d_model)
        self.attn = RelPartialLearnableMultiHeadAttn(n_head, d_model, bug)
        self.r_w_bias = nn.Parameter(torch.randn(n_head, d_model // n_head) * 0.02)
        self.r_r_bias = nn.Parameter(torch.randn(n_head, d_model // n_head) * 0.02)

    def forward(self, word_emb):
        qlen, _ = word_emb.size()[:2]
        klen = qlen
        dec_attn_mask = torch.triu(word_emb.new_ones(qlen, klen), diagonal=1).bool()[:, :, None]  # (T, T, 1)
        pos_seq = torch.arange(klen - 1, -1, -1.0)  # (R,)
        pos_emb = self.pos_emb(pos_seq)  # (R, 1, D)
        return self.attn(word_emb, pos_emb, self.r_w_bias, self.r_r_bias, attn_mask=dec_attn_mask)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'T=6 B=2 D=32 H=4': sequence-first input (T, B, D)."""
    torch.manual_seed(0)
    return MemTransformerLayer(D, H, bug).eval(), (torch.randn(T, B, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers, src/transformers/models/xlnet/modeling_xlnet.py (v4.46, ``XLNetRelativeAttention
.forward`` with ``g`` and ``target_mapping``, ``rel_attn_core``, ``post_attention``, ``rel_shift_bnij``;
``XLNetModel.forward``'s masks and ``relative_positional_encoding``): XLNet's two-stream attention, time-major. The
content stream ``h`` (word embeddings, ``(T, B, D)``) and the query stream ``g`` (``mask_emb`` expanded to ``(P, B,
D)``, one row per token to predict) share keys and values, both from ``h``. ``perm_mask`` ``(B, T, T)`` (1: query
``i`` may not see key ``j``) is turned ``permute(1, 2, 0)`` to ``(T, T, B)``, added to the padding ``data_mask``
``(1, T, B)`` and ``> 0``: ``attn_mask_g``; ``non_tgt_mask = -eye(T)`` lets the content stream see its own token:
``attn_mask_h``. ``target_mapping`` ``(B, P, T)`` is turned ``(P, T, B)``; the query stream's heads are scattered to
their positions by ``einsum("mbnd,mlb->lbnd")``, attend like the content stream, and are gathered back by
``einsum("lbnd,mlb->mbnd")``. ``rel_attn_core``: ``ac = einsum("ibnd,jbnd->bnij", q + r_w_bias, k)``, ``bd`` over
the sinusoids of ``arange(T, -T, -1)`` shifted by ``rel_shift_bnij``, ``(ac + bd) * scale - 1e30 *
einsum("ijbn->bnij", mask)``, ``softmax(dim=3)``, ``einsum("bnij,jbnd->ibnd")`` with v; ``post_attention``:
``einsum("ibnd,hnd->ibh")`` with ``o``, the residual, LayerNorm. Two layers; the model returns the query stream.

Bugs: ``perm-mask-keys-first``: ``perm_mask.permute(2, 1, 0)`` (the ``(B, T, T)`` mask turned ``(j, i, b)``: the
permutation read with queries and keys swapped, so each token sees the tokens that may not see it);
``h-stream-perm-mask``: the content stream run under ``attn_mask_g`` too (``non_tgt_mask`` left out: a token to be
predicted loses its own content in the content stream, which the next layer's query stream reads)."""

import sys

import torch
from torch import nn


class XLNetRelativeAttention(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head, self.d_head = n_head, d_model // n_head
        self.scale = 1 / (self.d_head ** 0.5)
        for name in ("q", "k", "v", "o", "r"):
            setattr(self, name, nn.Parameter(torch.randn(d_model, n_head, self.d_head) * 0.05))
        self.r_r_bias = nn.Parameter(torch.randn(n_head, self.d_head) * 0.05)
        self.r_w_bias = nn.Parameter(torch.randn(n_head, self.d_head) * 0.05)
        self.layer_norm = nn.LayerNorm(d_model)

    @staticmethod
    def rel_shift_bnij(x, klen):
        x_size = x.shape                                                             # (B, H, T, 2T)
        x = x.reshape(x_size[0], x_size[1], x_size[3], x_size[2])                    # (B, H, 2T, T)
        x = x[:, :, 1:, :]
        x = x.reshape(x_size[0], x_size[1], x_size[2], x_size[3] - 1)                # (B, H, T, 2T-1)
        return torch.index_select(x, 3, torch.arange(klen, dtype=torch.long))        # (B, H, T, T)

    def rel_attn_core(self, q_head, k_head_h, v_head_h, k_head_r, attn_mask):
        ac = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_w_bias, k_head_h)       # (B, H, T, T)
        bd = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_r_bias, k_head_r)       # (B, H, T, 2T)
        bd = self.rel_shift_bnij(bd, klen=ac.shape[3])
        attn_score = (ac + bd) * self.scale
        attn_score = attn_score - 1e30 * torch.einsum("ijbn->bnij", attn_mask)
        attn_prob = nn.functional.softmax(attn_score, dim=3)
        return torch.einsum("bnij,jbnd->ibnd", attn_prob, v_head_h)                  # (T, B, H, d)

    def post_attention(self, h, attn_vec):
        attn_out = torch.einsum("ibnd,hnd->ibh", attn_vec, self.o)                   # (T, B, D)
        return self.layer_norm(attn_out + h)

    def forward(self, h, g, attn_mask_h, attn_mask_g, r, target_mapping):
        k_head_h = torch.einsum("ibh,hnd->ibnd", h, self.k)                          # (T, B, H, d)
        v_head_h = torch.einsum("ibh,hnd->ibnd", h, self.v)                          # (T, B, H, d)
        k_head_r = torch.einsum("ibh,hnd->ibnd", r, self.r)                          # (2T, B, H, d)
        q_head_h = torch.einsum("ibh,hnd->ibnd", h, self.q)                          # (T, B, H, d)
        attn_vec_h = self.rel_attn_core(q_head_h, k_head_h, v_head_h, k_head_r, attn_mask_h)
        output_h = self.post_attention(h, attn_vec_h)                                # (T, B, D)
        q_head_g = torch.einsum("ibh,hnd->ibnd", g, self.q)                          # (P, B, H, d)
        q_head_g = torch.einsum("mbnd,mlb->lbnd", q_head_g, target_mapping)          # (T, B, H, d)
        attn_vec_g = self.rel_attn_core(q_head_g, k_head_h, v_head_h, k_head_r, attn_mask_g)
        attn_vec_g = torch.einsum("lbnd,mlb->mbnd", attn_vec_g, target_mapping)      # (P, B, H, d)
        return output_h, self.post_attention(g, attn_vec_g)                          # (T, B, D), (P, B, D)


class XLNetSketch(nn.Module):
    def __init__(self, vocab, d_model, n_head, n_layer=2, bug=""):
        super().__init__()
        self.d_model, self.bug = d_model, bug
        self.word_embedding = nn.Embedding(vocab, d_model)
        self.mask_emb = nn.Parameter(torch.randn(1, 1, d_model) * 0.05)
        self.layer = nn.ModuleList(XLNetRelativeAttention(d_model, n_head) for _ in range(n_layer))

    def relative_positional_encoding(self, qlen, klen, bsz):
        freq_seq = torch.arange(0, self.d_model, 2.0)
        inv_freq = 1 / torch.pow(10000, (freq_seq / self.d_model))
        fwd_pos_seq = torch.arange(klen, -qlen, -1.0)                                # (2T,)
        sinusoid_inp = torch.einsum("i,d->id", fwd_pos_seq, inv_freq)
        pos_emb = torch.cat([torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)], dim=-1)   # (2T, D)
        return pos_emb[:, None, :].expand(-1, bsz, -1)                               # (2T, B, D)

    def forward(self, input_ids, attention_mask, perm_mask, target_mapping):   # (B, T), (B, T), (B, T, T), (B, P, T)
        input_ids = input_ids.transpose(0, 1).contiguous()                           # (T, B)
        qlen, bsz = input_ids.shape
        if self.bug == "perm-mask-keys-first":
            perm_mask = perm_mask.permute(2, 1, 0).contiguous()                      # (T, T, B)
        else:
            perm_mask = perm_mask.permute(1, 2, 0).contiguous()                      # (T, T, B)
        target_mapping = target_mapping.permute(1, 2, 0).contiguous()                # (P, T, B)
        input_mask = 1.0 - attention_mask.transpose(0, 1).contiguous().float()       # (T, B)
        data_mask = input_mask[None] + perm_mask                                     # (T, T, B)
        attn_mask = (data_mask[:, :, :, None] > 0).float()                           # (T, T, B, 1)
        non_tgt_mask = -torch.eye(qlen)
        non_tgt_mask = ((attn_mask + non_tgt_mask[:, :, None, None]) > 0).float()    # (T, T, B, 1)
        if self.bug == "h-stream-perm-mask":
            non_tgt_mask = attn_mask
        output_h = self.word_embedding(input_ids)                                    # (T, B, D)
        output_g = self.mask_emb.expand(target_mapping.shape[0], bsz, -1)            # (P, B, D)
        pos_emb = self.relative_positional_encoding(qlen, qlen, bsz)
        for layer_module in self.layer:
            output_h, output_g = layer_module(output_h, output_g, non_tgt_mask, attn_mask, pos_emb, target_mapping)
        return output_g.permute(1, 0, 2).contiguous()                                # (B, P, D)


BUGS = ("perm-mask-keys-first", "h-stream-perm-mask")
TWINS = ()
DIMS = ("B=2 T=7 D=32 H=4 P=3",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 P=3"}


def build(bug="", B=2, T=7, D=32, H=4, P=3):  # noqa: N803
    """The last ``P`` tokens are predicted: no token sees them (``perm_mask[:, :, -P:] = 1``); no padding."""
    torch.manual_seed(0)
    perm_mask = torch.zeros(B, T, T)
    perm_mask[:, :, -P:] = 1.0
    target_mapping = torch.zeros(B, P, T)
    target_mapping[:, torch.arange(P), torch.arange(T - P, T)] = 1.0
    inputs = (torch.randint(0, 50, (B, T)), torch.ones(B, T), perm_mask, target_mapping)
    return XLNetSketch(50, D, H, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

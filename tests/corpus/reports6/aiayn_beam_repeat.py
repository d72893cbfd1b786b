"""jadore801120/attention-is-all-you-need-pytorch issue #28 ("Bug in translating"; a second user: "I find the same
problem..."; jadore801120: "This bug has been fixed in commit defe385"): ``Translator.translate_batch`` expanded the
source for beam search with ``src_seq.repeat(beam_size, 1)``, rows ``seq1 seq2 seq3 seq1 seq2 seq3 …``, while the
beams' decoder input was stacked per sentence, ``torch.stack([b.get_current_state() for b in beam])``, rows
``seq1 seq1 seq1 seq2 …``: the decoder's cross attention for one sentence's beams read the encodings of other
sentences. The fix expands the source beam by beam (``repeat(1, beam_size).view(n_inst * beam_size, len_s)``, the
same order as the beams).

The repository's idiom: ``Encoder``/``Decoder`` with ``src_word_emb``/``tgt_word_emb`` and a sinusoid position
table, ``MultiHeadAttention`` with ``w_qs``/``w_ks``/``w_vs``, ``view(sz_b, len_q, n_head, d_k).transpose(1, 2)``,
``ScaledDotProductAttention`` (``q / temperature @ kᵀ``, ``masked_fill(mask == 0, -1e9)``, ``softmax(dim=-1)``),
``transpose(1, 2).contiguous().view(sz_b, len_q, -1)``, ``fc``; one encoder layer, one decoder layer (its
self-attention causal, its cross attention over the source's padding mask), run at a beam-search step over
every beam's partial translation. Two sentences of S tokens, a beam of 3, partial translations of T tokens.

Twin (argument): ``source-tiled``: the source repeated ``repeat(beam_size, 1)``. A real bug, but not one the
trace can see: the beams enter as a Python list of ``(T,)`` tensors stacked into one batch, so which sentence
each decoder row belongs to is the list's order, which torch never records; the source's order (``3*B`` against
``B*3``) is proven, the decoder's is not, and either order of the source is right for some order of the list."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ()
TWINS = ("source-tiled",)
DIMS = ("B=2 T=5 S=7 D=32 H=4",)
EQUAL = {"B=2 T=5 S=7 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}
PAD, VOCAB, BEAM = 0, 19, 3


class MultiHeadAttention(nn.Module):
    def __init__(self, n_head, d_model):
        super().__init__()
        self.n_head, self.d_k = n_head, d_model // n_head
        self.w_qs, self.w_ks, self.w_vs = (nn.Linear(d_model, d_model, bias=False) for _ in range(3))
        self.fc = nn.Linear(d_model, d_model, bias=False)

    def forward(self, q, k, v, mask=None):
        sz_b, len_q, len_k = q.size(0), q.size(1), k.size(1)
        residual = q
        q = self.w_qs(q).view(sz_b, len_q, self.n_head, self.d_k).transpose(1, 2)   # (b, n, lq, dk)
        k = self.w_ks(k).view(sz_b, len_k, self.n_head, self.d_k).transpose(1, 2)
        v = self.w_vs(v).view(sz_b, len_k, self.n_head, self.d_k).transpose(1, 2)
        attn = torch.matmul(q / self.d_k ** 0.5, k.transpose(2, 3))                 # (b, n, lq, lk)
        if mask is not None:
            attn = attn.masked_fill(mask.unsqueeze(1) == 0, -1e9)
        output = torch.matmul(F.softmax(attn, dim=-1), v)                           # (b, n, lq, dk)
        output = output.transpose(1, 2).contiguous().view(sz_b, len_q, -1)          # (b, lq, D)
        return self.fc(output) + residual


class Transformer(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.src_word_emb, self.tgt_word_emb = nn.Embedding(VOCAB, d_model), nn.Embedding(VOCAB, d_model)
        self.enc_attn = MultiHeadAttention(n_head, d_model)
        self.slf_attn = MultiHeadAttention(n_head, d_model)
        self.enc_dec_attn = MultiHeadAttention(n_head, d_model)

    def encode(self, src_seq):
        src_mask = (src_seq != PAD).unsqueeze(-2)                                   # (b, 1, S)
        enc = self.src_word_emb(src_seq)                                            # (b, S, D)
        return self.enc_attn(enc, enc, enc, src_mask), src_mask

    def decode(self, trg_seq, enc_output, src_mask):
        len_t = trg_seq.size(1)
        trg_mask = (trg_seq != PAD).unsqueeze(-2) & torch.tril(torch.ones(1, len_t, len_t)).bool()   # (b, T, T)
        dec = self.tgt_word_emb(trg_seq)                                            # (b, T, D)
        dec = self.slf_attn(dec, dec, dec, trg_mask)
        return self.enc_dec_attn(dec, enc_output, enc_output, src_mask)


class Translator(nn.Module):
    def __init__(self, d_model, n_head, bug=""):
        super().__init__()
        self.model, self.bug = Transformer(d_model, n_head), bug

    def forward(self, src_seq, beams):
        n_inst, len_s = src_seq.shape
        if self.bug == "source-tiled":
            src_seq = src_seq.repeat(BEAM, 1)                                       # (k·B, S): seq1 seq2 seq1 …
        else:
            src_seq = src_seq.repeat(1, BEAM).view(n_inst * BEAM, len_s)            # (B·k, S): seq1 seq1 seq1 …
        enc_output, src_mask = self.model.encode(src_seq)
        dec_seq = torch.stack([b for sentence in beams for b in sentence])          # (B·k, T): seq1 seq1 seq1 …
        return self.model.decode(dec_seq, enc_output, src_mask)


def build(bug="", B=2, T=5, S=7, D=32, H=4):
    torch.manual_seed(0)
    src = torch.randint(1, VOCAB, (B, S))
    src[-1, -2:] = PAD                                                              # the last sentence is padded
    beams = [[torch.randint(1, VOCAB, (T,)) for _ in range(BEAM)] for _ in range(B)]
    return Translator(D, H, bug).eval(), (src, beams)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

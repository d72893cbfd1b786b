"""pytorch/pytorch, torch/nn/modules/transformer.py (v2.x, ``nn.Transformer``, library code):
``nn.Transformer(d_model, nhead, num_encoder_layers=1, num_decoder_layers=1, batch_first=True,
dropout=0.0)``, ``Transformer.generate_square_subsequent_mask(T)`` (``-inf`` above the diagonal) passed as
``tgt_mask`` with ``tgt_is_causal=True``; a source of S frames, a target of T tokens; the decoder's
cross-attention reads the encoder's memory unmasked.

Bug (argument): ``keep-mask``: ``tgt_mask=torch.tril(torch.ones(T, T, dtype=torch.bool))`` without the hint
(the Hugging Face convention, True where a key may be seen, handed to torch, where a boolean ``attn_mask`` is
True where a key may NOT be seen: each token hides its past and itself and reads the later tokens, the last
row all hidden; a natural slip between the two conventions)."""

import sys

import torch
from torch import nn

BUGS = ("keep-mask",)
TWINS = ()
DIMS = ("B=2 T=6 S=10 D=64 H=4",)


class Seq2Seq(nn.Module):
    def __init__(self, d, h, bug=""):
        super().__init__()
        self.bug = bug
        self.transformer = nn.Transformer(d, h, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=2 * d,
                                          dropout=0.0, batch_first=True)

    def forward(self, src, tgt):
        if self.bug == "keep-mask":
            keep = torch.tril(torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool))
            return self.transformer(src, tgt, tgt_mask=keep)
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.transformer(src, tgt, tgt_mask=tgt_mask, tgt_is_causal=True)


def build(bug="", B=2, T=6, S=10, D=64, H=4):
    torch.manual_seed(0)
    return Seq2Seq(D, H, bug), (torch.randn(B, S, D), torch.randn(B, T, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)

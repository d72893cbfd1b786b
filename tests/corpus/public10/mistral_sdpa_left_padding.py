"""huggingface/transformers, src/transformers/models/mistral/modeling_mistral.py on its SDPA path
(``sdpa_attention_forward``: ``repeat_kv``, then ``F.scaled_dot_product_attention(query, key, value,
attn_mask=causal_mask, is_causal=False)``) fed a left-padded batch's boolean ``[B, 1, T, T]`` mask (True
attends: the causal triangle AND the keys' padding) as transformers' ``masking_utils.py``
(``sdpa_mask_older_torch``) builds it. The first queries of a left-padded sequence have no key left, and that
function opens their rows on purpose (``causal_mask |= torch.all(~causal_mask, dim=-1, keepdim=True)``: "we
need to update the mask in case a query is not attending to any tokens (due to padding). See details in
https://github.com/pytorch/pytorch/issues/110213"; ``AttentionMaskConverter._unmask_unattended`` does the same
to a float mask), so they attend to every key, the later ones too. Their outputs are padding.

Bugs (argument): ``pad-on-queries``: the padding laid on the query axis (``keep[:, None, :, None]`` for
``padding_mask[:, None, None, :]``, the slip the fairseq round (tests/corpus/public7/fairseq_mha.py) shows on
``key_padding_mask``); ``causal-off-by-one``: ``tril(-1)`` for ``tril(0)``, each token hidden from itself."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("pad-on-queries", "causal-off-by-one")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def repeat_kv(x, n_rep):
    b, h_kv, t, d = x.shape
    x = x[:, :, None, :, :].expand(b, h_kv, n_rep, t, d)  # (B, H_kv, n_rep, T, d)
    return x.reshape(b, h_kv * n_rep, t, d)  # (B, H, T, d)


class MistralSdpaAttention(nn.Module):
    def __init__(self, d, h, h_kv):
        super().__init__()
        self.h, self.h_kv, self.hd = h, h_kv, d // h
        self.q_proj, self.o_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, h_kv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, h_kv * self.hd, bias=False)

    def forward(self, x, attn_mask):
        bsz, q_len, _ = x.size()
        q = self.q_proj(x).view(bsz, q_len, self.h, self.hd).transpose(1, 2)  # (B, H, T, d)
        k = self.k_proj(x).view(bsz, q_len, self.h_kv, self.hd).transpose(1, 2)  # (B, H_kv, T, d)
        v = self.v_proj(x).view(bsz, q_len, self.h_kv, self.hd).transpose(1, 2)  # (B, H_kv, T, d)
        k, v = repeat_kv(k, self.h // self.h_kv), repeat_kv(v, self.h // self.h_kv)  # (B, H, T, d)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=False)  # (B, H, T, d)
        out = out.transpose(1, 2).contiguous().view(bsz, q_len, -1)  # (B, T, D)
        return self.o_proj(out)


def left_padded_mask(B, T, bug=""):
    """``[B, 1, T, T]``, True where a query attends: the causal triangle and the left padding (two tokens of
    sequence 0), with the rows left with no key opened (``_unmask_unattended``)."""
    keep = torch.ones(B, T, dtype=torch.bool)
    keep[0, :2] = False
    causal = torch.ones(T, T, dtype=torch.bool).tril(-1 if bug == "causal-off-by-one" else 0)  # (T, T)
    padding = keep[:, None, :, None] if bug == "pad-on-queries" else keep[:, None, None, :]
    mask = causal[None, None] & padding  # (B, 1, T, T)
    return mask | ~mask.any(dim=-1, keepdim=True)  # (B, 1, T, T): a row with no key attends everywhere


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return MistralSdpaAttention(D, H, H_kv), (torch.randn(B, T, D), left_padded_mask(B, T, bug))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)

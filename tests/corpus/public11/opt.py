"""huggingface/transformers, src/transformers/models/opt/modeling_opt.py (v4.3x, ``OPTAttention``, the eager
path): ``q_proj(x) * scaling``, ``_shape(tensor, seq_len, bsz)`` = ``view(bsz, seq_len, H, d).transpose(1, 2)
.contiguous()``, then ``view(bsz * H, -1, d)``; ``torch.bmm`` for scores and output; the weights viewed
``(bsz, H, tgt_len, src_len)`` to add the ``(B, 1, T, T)`` causal mask and back to ``(bsz * H, T, T)``;
``attn_output.view(bsz, H, T, d).transpose(1, 2).reshape(bsz, T, D)``.

Bugs (argument): ``weights-view-order``: the weights viewed ``(H, bsz, tgt_len, src_len)`` to add the mask
(the fold ``bsz * H`` read in the wrong order; it runs wherever B = H or the mask broadcasts): the mask of
one sequence lands on the rows of another."""

import sys

import torch
from torch import nn


class OPTAttention(nn.Module):
    def __init__(self, d, h, bug=""):
        super().__init__()
        self.h, self.hd, self.bug = h, d // h, bug
        self.scaling = self.hd**-0.5
        self.k_proj, self.v_proj, self.q_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.h, self.hd).transpose(1, 2).contiguous()   # (B, H, T, d)

    def forward(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.h, -1, self.hd)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)   # (B*H, T, d)
        key_states = key_states.view(*proj_shape)
        value_states = value_states.view(*proj_shape)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))         # (B*H, T, T)
        if self.bug == "weights-view-order":
            attn_weights = attn_weights.view(self.h, bsz, tgt_len, src_len) + attention_mask   # bug
        else:
            attn_weights = attn_weights.view(bsz, self.h, tgt_len, src_len) + attention_mask   # (B, H, T, T)
        attn_weights = attn_weights.view(bsz * self.h, tgt_len, src_len)
        attn_probs = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_probs, value_states)                         # (B*H, T, d)
        attn_output = attn_output.view(bsz, self.h, tgt_len, self.hd).transpose(1, 2)   # (B, T, H, d)
        return self.out_proj(attn_output.reshape(bsz, tgt_len, self.h * self.hd))


def causal_mask(B, T):
    """``(B, 1, T, T)``, OPT's ``_prepare_4d_causal_attention_mask`` with no padding: finfo.min above the
    diagonal."""
    mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)
    return mask[None, None].expand(B, 1, T, T)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return OPTAttention(D, H, bug).eval(), (torch.randn(B, T, D), causal_mask(B, T))


BUGS = ("weights-view-order",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers issue #40214, fixed by PR #40324 ("Fix chunked attention mask with left-padding"):
Llama 4's chunked attention lets a query see the keys of its own chunk only, ``q_idx // C == kv_idx // C``,
with chunk boundaries counted from the first token of the sequence; in a left-padded batch the indices were the
padded columns', so a padded row's chunks started at its first pad, not at its first real token ("the padded
sequences need some offset to start the chunk at the correct index"). The fix subtracts each row's count of
left-padding tokens from both indices before dividing by the chunk size.

The idiom: ``masking_utils``-style mask functions (``chunked_overlay``: ``(kv_idx - pad[b]) // C == (q_idx -
pad[b]) // C``, ``causal``: ``kv_idx <= q_idx``, ``padding``: ``attention_mask[b, kv_idx]``) evaluated on
``arange`` grids into a boolean ``(B, 1, T, T)`` mask, one Llama-4 chunked attention layer (``view(B, T, H,
d).transpose(1, 2)``, ``F.scaled_dot_product_attention(attn_mask=mask)``), the second row left-padded by two,
chunk size 3.

Bug (argument): ``chunks-from-column``: the chunk ids taken from the padded column indices (no offset)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("chunks-from-column",)
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)


class ChunkedAttention(nn.Module):
    def __init__(self, dim, heads, bug="", chunk=3):
        super().__init__()
        self.heads, self.head_dim, self.bug, self.chunk = heads, dim // heads, bug, chunk
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def chunked_mask(self, attention_mask):                                   # (B, T) of 1/0
        bsz, seq = attention_mask.shape
        b = torch.arange(bsz)[:, None, None]
        q_idx, kv_idx = torch.arange(seq)[None, :, None], torch.arange(seq)[None, None, :]
        left_pad = (attention_mask.cumsum(-1) == 0).sum(-1)                      # (B,) left pads per row
        offset = 0 if self.bug == "chunks-from-column" else left_pad[:, None, None]
        same_chunk = (kv_idx - offset) // self.chunk == (q_idx - offset) // self.chunk     # [chunk]
        mask = same_chunk & (kv_idx <= q_idx) & attention_mask.bool()[b, kv_idx]
        return mask[:, None]                                                   # (B, 1, T, T)

    def forward(self, hidden_states, attention_mask):                     # (B, T, D), (B, T)
        bsz, seq, _ = hidden_states.shape
        q, k, v = (p(hidden_states).view(bsz, seq, self.heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.chunked_mask(attention_mask))
        return self.o_proj(out.transpose(1, 2).reshape(bsz, seq, -1))


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, :2] = 0                                                  # the second row left-padded by two
    return ChunkedAttention(D, H, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

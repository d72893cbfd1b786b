"""NVIDIA-NeMo/Automodel pull request #2316 ("feat: adding PP and CP for nemotron v3 models"; review on
``nemotron_v3/model.py``: "Bug (latent): ``cumsum(0)`` produces a **global** cross-batch cumulative sum when
``B > 1`` (e.g. ``[0, S1, S1+S2]`` instead of per-row ``[0, S]`` boundaries). This is semantically wrong —
``cu_seqlens`` should describe sub-sequence boundaries within a single flattened token stream, not span batch
rows", and its consumers "``searchsorted`` over this global cu_seqlens with ``arange(_S)`` (per-row
positions)"): the non-THD path recovered ``cu_seqlens`` from a padded 2D ``attention_mask`` as
``F.pad(seq_lens.cumsum(0), (1, 0))`` and each row's ``seq_idx`` was read against it, so in every row a
boundary fell at the *previous rows'* lengths.

The idiom: ``seq_lens = attention_mask.sum(dim=-1)``, ``cu_seqlens`` padded with a leading 0, ``seq_idx =
searchsorted(cu_seqlens[1:], arange(S), right=True)`` per row, tokens attending within their ``seq_idx``
(causal, as the hybrid model's attention layers do with ``seq_idx``), heads by ``view``/``transpose``,
``scaled_dot_product_attention``. The correct twin reads each row's own boundaries ``[0, seq_lens[b]]``. The
first row has two pads, the second none (so the global sum splits the second row at 4).

Bug (index, batch): ``cumsum-over-batch``: ``cu_seqlens`` accumulated over the batch axis."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("cumsum-over-batch",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class SeqIdxAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def seq_idx(self, attention_mask):
        B, S = attention_mask.shape
        seq_lens = attention_mask.sum(dim=-1).to(torch.int32)
        positions = torch.arange(S, dtype=torch.int32)
        if self.bug == "cumsum-over-batch":
            cu_seqlens = F.pad(seq_lens.cumsum(0).to(torch.int32), (1, 0))
            idx = torch.searchsorted(cu_seqlens[1:].contiguous(), positions, right=True)
            return idx.unsqueeze(0).expand(B, S)
        cu_seqlens = F.pad(seq_lens.unsqueeze(-1), (1, 0))                              # (B, 2): [0, len_b]
        return torch.searchsorted(cu_seqlens[:, 1:].contiguous(), positions.expand(B, S).contiguous(),
                                  right=True)                                           # (B, S)

    def forward(self, x, attention_mask):
        B, S, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q = q.view(B, S, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, S, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, S, self.num_heads, self.head_dim).transpose(1, 2)
        seq_idx = self.seq_idx(attention_mask)
        same = seq_idx[:, :, None] == seq_idx[:, None, :]
        mask = (same & torch.ones(S, S, dtype=torch.bool).tril())[:, None]             # (B, 1, S, S)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(out.transpose(1, 2).reshape(B, S, D))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, -2:] = 0
    return SeqIdxAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

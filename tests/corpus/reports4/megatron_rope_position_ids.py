"""NVIDIA/Megatron-LM issue #453 ("[BUG] RoPE ignores position IDs", labelled bug, reopened: "This is still
present in the current MCore version"): with ``--reset-position-ids`` (documents packed into one sequence,
each restarting at position 0) the model computed ``position_ids`` per document, but the rotary table was
built for ``arange(seq_length)`` and applied as is: each later document's tokens were rotated by their
place in the packed sequence instead of their place in their document. The expected behaviour: "the
indices in the sequence dimension for the given ``enc_position_ids`` should be taken instead".

Megatron's idiom: sequence-first activations ``[s, b, h]``, a fused ``query_key_value`` Linear viewed
``[s, b, np, 3·hn]`` and split, ``RotaryEmbedding(seq_len)`` returning ``emb`` of ``[s, 1, 1, d]``
(``outer(arange(s), inv_freq)``, ``cat((freqs, freqs), -1)``), ``apply_rotary_pos_emb(t, freqs)`` =
``t * cos + _rotate_half(t) * sin``; ``baddbmm`` scores on ``[b·np, sq, sk]``, the packed documents' block
causal mask (``reset_attention_mask``), softmax, ``bmm`` with values, ``[sq, b, np·hn]`` back. The fix
gathers the table at the positions: ``emb[position_ids]`` ``[b, s, d]`` moved to ``[s, b, 1, d]``.

Bug (argument): ``table-by-place``: the rotary table by place in the packed sequence."""

import math
import sys

import torch
from torch import nn

BUGS = ("table-by-place",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def _rotate_half(x):
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(t, freqs):
    return t * freqs.cos() + _rotate_half(t) * freqs.sin()


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, max_seq_len):
        seq = torch.arange(max_seq_len, dtype=self.inv_freq.dtype)
        freqs = torch.outer(seq, self.inv_freq)                                 # [s, d/2]
        return torch.cat((freqs, freqs), dim=-1)                                # [s, d]


class ParallelAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.np, self.hn, self.bug = num_heads, hidden_size // num_heads, bug
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.rotary_pos_emb = RotaryEmbedding(self.hn)
        self.norm_factor = math.sqrt(self.hn)

    def forward(self, hidden_states, attention_mask, position_ids):
        sq, b, _ = hidden_states.shape
        mixed = self.query_key_value(hidden_states).view(sq, b, self.np, 3 * self.hn)
        query_layer, key_layer, value_layer = torch.split(mixed, self.hn, dim=3)   # [s, b, np, hn]
        emb = self.rotary_pos_emb(sq)                                           # [s, d]
        if self.bug == "table-by-place":
            freqs = emb[:, None, None, :]                                       # [s, 1, 1, d] [rope]
        else:
            freqs = emb[position_ids].transpose(0, 1)[:, :, None, :]            # [s, b, 1, d] [rope]
        query_layer = apply_rotary_pos_emb(query_layer, freqs)
        key_layer = apply_rotary_pos_emb(key_layer, freqs)
        q = query_layer.reshape(sq, b * self.np, self.hn).transpose(0, 1)       # [b*np, sq, hn]
        k = key_layer.reshape(sq, b * self.np, self.hn).transpose(0, 1)
        v = value_layer.reshape(sq, b * self.np, self.hn).transpose(0, 1)
        scores = torch.baddbmm(torch.zeros(b * self.np, sq, sq), q, k.transpose(1, 2),
                               beta=0.0, alpha=1.0 / self.norm_factor)          # [b*np, sq, sk]
        scores = scores.view(b, self.np, sq, sq).masked_fill(attention_mask, -10000.0)
        probs = scores.softmax(dim=-1).view(b * self.np, sq, sq)
        context = torch.bmm(probs, v)                                           # [b*np, sq, hn]
        context = context.transpose(0, 1).reshape(sq, b, self.np * self.hn)     # [sq, b, h]
        return self.dense(context)


def packed_inputs(B, T):
    """Two documents per row (the second starting at T // 2): their positions and block-causal mask."""
    starts = torch.arange(T) >= T // 2
    position_ids = torch.where(starts, torch.arange(T) - T // 2, torch.arange(T)).expand(B, T)
    same_doc = starts[:, None] == starts[None, :]
    allowed = same_doc & torch.tril(torch.ones(T, T, dtype=torch.bool))
    return position_ids, (~allowed)[None, None].expand(B, 1, T, T)             # True: masked


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    position_ids, attention_mask = packed_inputs(B, T)
    return ParallelAttention(D, H, bug).eval(), (torch.randn(T, B, D), attention_mask, position_ids)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers pull request #46634 ("Fix packed-sequence mask ignored when a 2D attention_mask is
passed"; bin123apple: "``create_causal_mask`` (via ``_preprocess_mask_arguments`` in ``masking_utils.py``) only
detects packed sequences — multiple variable-length sequences packed into one row, with boundaries encoded in
``position_ids`` — when ``attention_mask is None``. In packed / ``use_remove_padding`` training the
attention_mask is typically a 2D all-ones tensor, which silently disables packed detection [...] and tokens
of a later packed segment attend tokens of an earlier one (cross-sequence contamination)"): the fix drops
the ``attention_mask is None`` clause from the gate of ``find_packed_sequence_indices``.

The idiom: ``find_packed_sequence_indices`` (``diff`` of the position ids with the first position minus one
prepended, ``(position_diff != 1).cumsum(-1)``), the causal mask and-ed with "same packed sequence" and with
the 2D padding mask, a Llama-style attention (``q_proj``/``k_proj``/``v_proj``, heads by ``view``/
``transpose``, ``scaled_dot_product_attention`` with the boolean mask, ``o_proj``), learned positions read at
``position_ids``. Each row packs two sequences (4 + 2 and 2 + 4 tokens) and the 2D mask is all ones.

Bug (mask): ``packed-gate-on-mask``: the packed detection gated on ``attention_mask is None``: with the
all-ones 2D mask the block-diagonal part is dropped and the second sequence attends the first."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("packed-gate-on-mask",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def find_packed_sequence_indices(position_ids):
    first_dummy_value = position_ids[:, :1] - 1
    position_diff = torch.diff(position_ids, prepend=first_dummy_value, dim=-1)
    return (position_diff != 1).cumsum(-1)                                              # (B, T)


class LlamaishAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states, mask):
        bsz, q_len, _ = hidden_states.size()
        shape = (bsz, q_len, self.num_heads, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)                   # (B, H, T, d)
        return self.o_proj(out.transpose(1, 2).reshape(bsz, q_len, -1))


class PackedLM(nn.Module):
    def __init__(self, vocab, hidden_size, num_heads, max_pos=16, bug=""):
        super().__init__()
        self.bug = bug
        self.embed_tokens, self.embed_positions = nn.Embedding(vocab, hidden_size), nn.Embedding(max_pos, hidden_size)
        self.input_layernorm, self.norm = nn.LayerNorm(hidden_size), nn.LayerNorm(hidden_size)
        self.self_attn = LlamaishAttention(hidden_size, num_heads)

    def create_causal_mask(self, attention_mask, position_ids):
        T = position_ids.size(1)
        mask = torch.ones(T, T, dtype=torch.bool).tril()[None] & attention_mask[:, None, :].bool()
        packed = None
        if self.bug == "packed-gate-on-mask":
            if position_ids is not None and attention_mask is None:
                packed = find_packed_sequence_indices(position_ids)
        elif position_ids is not None:
            packed = find_packed_sequence_indices(position_ids)
        if packed is not None:
            mask = mask & (packed[:, :, None] == packed[:, None, :])
        return mask[:, None]                                                            # (B, 1, T, T)

    def forward(self, input_ids, attention_mask, position_ids):
        x = self.embed_tokens(input_ids) + self.embed_positions(position_ids)
        mask = self.create_causal_mask(attention_mask, position_ids)
        x = x + self.self_attn(self.input_layernorm(x), mask)
        return self.norm(x)                                                             # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    cut = [4 if b % 2 == 0 else 2 for b in range(B)]
    position_ids = torch.stack([torch.cat([torch.arange(c), torch.arange(T - c)]) for c in cut])
    return PackedLM(50, D, H, bug=bug).eval(), (torch.randint(0, 50, (B, T)), torch.ones(B, T, dtype=torch.long),
                                                 position_ids)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

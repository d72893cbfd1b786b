"""ndif-team/nnsight issue #672, fixed by PR #673 ("fix(language): derive position_ids from the mask for
left-padded batches", merged): ``LanguageModel`` left-padded multi-prompt batches but never supplied
``position_ids``, so GPT-2 (learned absolute positions) gave every row ``arange(T)``: a prompt shorter than the
longest read its first real token at the position of the padding before it ("read shifted position embeddings
for the padded rows and silently mispredict every prompt shorter than the longest"). The fix derives them from
the mask, ``cumsum(-1) - 1`` with the padding filled with 1, as ``generate`` does.

The idiom: transformers' GPT-2 (``wte(input_ids) + wpe(position_ids)``, ``ln_1``, ``c_attn`` split in three
along the width, ``_split_heads`` as ``view(B, T, H, d).permute(0, 2, 1, 3)``, scores ``/ sqrt(d)``, the causal
``tril`` buffer by ``torch.where`` with the dtype's minimum, the 2-d padding mask added as ``(1 - mask) * min``,
``softmax(dim=-1)``, ``_merge_heads``, ``c_proj``), the first row left-padded by two.

Bug (argument): ``positions-without-mask``: ``position_ids = arange(T)`` for every row."""

import math
import sys

import torch
from torch import nn

BUGS = ("positions-without-mask",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class GPT2Attention(nn.Module):
    def __init__(self, hidden, heads, max_positions=16):
        super().__init__()
        self.num_heads, self.head_dim, self.split_size = heads, hidden // heads, hidden
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        bias = torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool))
        self.register_buffer("bias", bias.view(1, 1, max_positions, max_positions), persistent=False)

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)

    def _merge_heads(self, tensor):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        return tensor.view(tensor.size()[:-2] + (self.num_heads * self.head_dim,))

    def forward(self, hidden_states, attention_mask):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        attn_weights = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(self.head_dim)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.full([], torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        return self.c_proj(self._merge_heads(torch.matmul(attn_weights, value)))


class GPT2Model(nn.Module):
    def __init__(self, vocab, hidden, heads, bug="", max_positions=16):
        super().__init__()
        self.bug = bug
        self.wte, self.wpe = nn.Embedding(vocab, hidden), nn.Embedding(max_positions, hidden)
        self.ln_1, self.ln_f = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn = GPT2Attention(hidden, heads, max_positions)

    def forward(self, input_ids, attention_mask):                                       # (B, T), (B, T)
        batch, seq_len = input_ids.shape
        if self.bug == "positions-without-mask":
            position_ids = torch.arange(seq_len, dtype=torch.long).unsqueeze(0)        # [positions]
        else:
            position_ids = attention_mask.long().cumsum(-1) - 1                         # [positions]
            position_ids = position_ids.masked_fill(attention_mask == 0, 1)
        hidden_states = self.wte(input_ids) + self.wpe(position_ids)                   # [embed]
        extended = attention_mask[:, None, None, :].to(hidden_states.dtype)
        extended = (1.0 - extended) * torch.finfo(hidden_states.dtype).min
        hidden_states = hidden_states + self.attn(self.ln_1(hidden_states), extended)
        return self.ln_f(hidden_states)                                                 # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, :2] = 0                                                           # left padding
    input_ids = torch.randint(1, 50, (B, T)).masked_fill(attention_mask == 0, 0)
    return GPT2Model(50, D, H, bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

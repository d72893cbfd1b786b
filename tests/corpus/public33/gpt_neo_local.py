"""transformers, src/transformers/models/gpt_neo/modeling_gpt_neo.py (v4.46, ``GPTNeoSelfAttention``,
``GPTNeoBlock``, ``GPTNeoModel``): EleutherAI's GPT-Neo, global and local layers alternating. Learned absolute
positions; ``q_proj``/``k_proj``/``v_proj`` without bias, ``_split_heads``: ``view(B, T, H, d).permute(0, 2, 1,
3)``; ``_attn`` in float32 and *unscaled* (GPT-Neo does not divide by ``sqrt(d)``); the causal mask is a boolean
``tril`` buffer, on the local layer ``bitwise_xor`` with its own ``tril(-window_size)`` (a band of the last
``window_size`` keys), cut ``bias[:, :, k - q : k, :k]`` and applied with ``torch.where(mask, w, finfo.min)``; the
padding mask ``(1 - mask[:, None, None, :]) * finfo.min`` added; ``softmax(dim=-1)``, ``_merge_heads``:
``permute(0, 2, 1, 3).contiguous().view(B, T, D)``, ``out_proj`` with bias.

Bugs: ``merge-heads-without-permute``: ``_merge_heads`` as ``view(B, T, D)`` straight from ``(B, H, T, d)`` (the
natural slip of a hand-written merge, the heads' rows read as tokens); ``padding-mask-over-queries``: the padding
mask broadcast ``mask[:, None, :, None]`` (a natural slip: the 4-D mask's singleton put on the keys, so padded
queries are masked and padded keys seen)."""

import sys

import torch
from torch import nn


class GPTNeoSelfAttention(nn.Module):
    def __init__(self, dim, heads, local, window_size=4, max_positions=32, bug=""):
        super().__init__()
        bias = torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
            1, 1, max_positions, max_positions)
        if local:
            bias = torch.bitwise_xor(bias, torch.tril(bias, -window_size))
        self.register_buffer("bias", bias, persistent=False)
        self.num_heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=True)

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)

    def _merge_heads(self, tensor):
        if self.bug == "merge-heads-without-permute":
            return tensor.contiguous().view(tensor.size(0), tensor.size(2), self.num_heads * self.head_dim)
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        return tensor.view(tensor.size()[:-2] + (self.num_heads * self.head_dim,))

    def _attn(self, query, key, value, attention_mask):
        query, key = query.to(torch.float32), key.to(torch.float32)
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]
        mask_value = torch.tensor(torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1).to(value.dtype)
        return torch.matmul(attn_weights, value)

    def forward(self, hidden_states, attention_mask):
        query = self._split_heads(self.q_proj(hidden_states))
        key = self._split_heads(self.k_proj(hidden_states))
        value = self._split_heads(self.v_proj(hidden_states))
        attn_output = self._merge_heads(self._attn(query, key, value, attention_mask))
        return self.out_proj(attn_output)


class GPTNeoBlock(nn.Module):
    def __init__(self, dim, heads, local, bug=""):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = GPTNeoSelfAttention(dim, heads, local, bug=bug)
        self.c_fc, self.c_proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, hidden_states, attention_mask):
        hidden_states = hidden_states + self.attn(self.ln_1(hidden_states), attention_mask)
        return hidden_states + self.c_proj(nn.functional.gelu(self.c_fc(self.ln_2(hidden_states))))


class GPTNeoModel(nn.Module):
    def __init__(self, vocab, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(32, dim)
        self.h = nn.ModuleList([GPTNeoBlock(dim, heads, local=False, bug=bug), GPTNeoBlock(dim, heads, local=True,
                                                                                          bug=bug)])
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, input_ids, attention_mask):
        position_ids = torch.arange(input_ids.shape[-1]).unsqueeze(0)
        hidden_states = self.wte(input_ids) + self.wpe(position_ids)
        if self.bug == "padding-mask-over-queries":
            attention_mask = attention_mask[:, None, :, None]
        else:
            attention_mask = attention_mask[:, None, None, :]
        attention_mask = (1.0 - attention_mask.to(torch.float32)) * torch.finfo(torch.float32).min
        for block in self.h:
            hidden_states = block(hidden_states, attention_mask)
        return self.ln_f(hidden_states)


BUGS = ("merge-heads-without-permute", "padding-mask-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(0, 40, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, -2:] = 0                                               # series 0 right-padded
    return GPTNeoModel(40, D, H, bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

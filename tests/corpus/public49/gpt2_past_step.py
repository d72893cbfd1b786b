"""huggingface/transformers ``modeling_gpt2.py`` (v4.30, the legacy tuple cache): ``GPT2Model.forward`` reads
``past_length = past_key_values[0][0].size(-2)`` and embeds ``position_ids = torch.arange(past_length,
input_shape[-1] + past_length)``; ``GPT2Attention`` splits heads with ``view`` + ``permute(0, 2, 1, 3)``, joins
``layer_past`` along the tokens (``torch.cat((past_key, key), dim=-2)``), scales by ``value.size(-1) ** 0.5`` and
picks the causal rows of its ``bias`` buffer for the new queries, ``self.bias[:, :, key_length - query_length :
key_length, :key_length]``, before ``torch.where(causal_mask, attn_weights, mask_value)``. Used as a user drives
``generate``: a prefill of the prompt ``(B, T)``, then one step fed the next token's ids ``(B, 1)`` with the cache.

Bug (mask rows): ``mask-rows-from-start``: the causal rows picked as ``self.bias[:, :, :query_length,
:key_length]`` (the first row of the triangle, as written before the cache existed): at the decoding step the one
query sees only the first key."""

import sys

import torch
from torch import nn

BUGS = ("mask-rows-from-start",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class GPT2Attention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_positions=16, bug=""):
        super().__init__()
        self.bug, self.num_heads, self.head_dim = bug, num_heads, embed_dim // num_heads
        self.register_buffer("bias", torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool))
                             .view(1, 1, max_positions, max_positions), persistent=False)
        self.c_attn = nn.Linear(embed_dim, 3 * embed_dim)
        self.c_proj = nn.Linear(embed_dim, embed_dim)

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)                               # (B, H, T, d_k)

    def _merge_heads(self, tensor):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()                               # (B, T, H, d_k)
        return tensor.view(tensor.size()[:-2] + (self.num_heads * self.head_dim,))      # (B, T, D)

    def _attn(self, query, key, value):
        attn_weights = torch.matmul(query, key.transpose(-1, -2)) / (value.size(-1) ** 0.5)  # (B, H, T, T_k)
        query_length, key_length = query.size(-2), key.size(-2)
        if self.bug == "mask-rows-from-start":
            causal_mask = self.bias[:, :, :query_length, :key_length]                      # [mask]
        else:
            causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]  # [mask]
        mask_value = torch.full([], torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        return torch.matmul(attn_weights, value)                                        # (B, H, T, d_k)

    def forward(self, hidden_states, layer_past=None):
        query, key, value = self.c_attn(hidden_states).split(self.num_heads * self.head_dim, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        if layer_past is not None:
            past_key, past_value = layer_past
            key = torch.cat((past_key, key), dim=-2)                                    # (B, H, T_k, d_k)
            value = torch.cat((past_value, value), dim=-2)                              # (B, H, T_k, d_k)
        attn_output = self._attn(query, key, value)
        return self.c_proj(self._merge_heads(attn_output)), (key, value)


class GPT2Model(nn.Module):
    def __init__(self, vocab_size, n_embd, n_head, n_positions=16, bug=""):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(n_positions, n_embd)
        self.ln_1, self.ln_f = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = GPT2Attention(n_embd, n_head, n_positions, bug=bug)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))
        self.ln_2 = nn.LayerNorm(n_embd)

    def step(self, input_ids, past_key_values=None):
        input_shape = input_ids.size()
        past_length = 0 if past_key_values is None else past_key_values[0].size(-2)
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long)
        position_ids = position_ids.unsqueeze(0)                                        # (1, T)
        hidden_states = self.wte(input_ids) + self.wpe(position_ids)                    # (B, T, D)
        attn_output, present = self.attn(self.ln_1(hidden_states), past_key_values)
        hidden_states = hidden_states + attn_output
        hidden_states = hidden_states + self.mlp(self.ln_2(hidden_states))
        return self.ln_f(hidden_states), present

    def forward(self, input_ids, next_ids):                                             # (B, T), (B, 1)
        _, past = self.step(input_ids)
        out, _ = self.step(next_ids, past)
        return out                                                                      # (B, 1, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return GPT2Model(50, D, H, bug=bug).eval(), (torch.randint(0, 50, (B, T)), torch.randint(0, 50, (B, 1)))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

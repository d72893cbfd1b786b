"""mosaicml/examples pull request #257 ("Fix slicing for padding + cache", merged): ``MosaicGPT.forward`` in
``examples/llm/src/models/mosaic_gpt/mosaic_gpt.py`` moves each row's learned positions back by the padding to its
left, ``pos = clamp(pos - cumsum((attention_mask == 0)[:, past_position:], dim=1), min=0)``, but cut the mask to
the new tokens *before* the cumulative sum. On a decoding step after a left-padded prompt the cut mask holds no
pad, so the new token of a padded row is embedded at ``past_position`` (as if it had no padding) while its prompt
was embedded from 0 after the pads: the row's positions jump by its number of pads. The PR: "Previously, the
slicing happened to the ``attention_mask == 0`` part, but should have happened outside of the cumsum part. This
only had an effect when doing both kv caching and padding together"; the fix is ``cumsum((attention_mask == 0),
dim=1)[:, past_position:]``, tested by ``test_forward_with_cache_and_padding`` (the same output with and without a
pad in front).

The idiom (MosaicGPT of the time, torch attention): ``wte`` + ``wpe`` with ``past_position =
past_key_values[0][0].size(1)`` (keys ``(batch, seq, dim)``), a fused ``Wqkv`` chunked in three, the cache joined
on dim 1, ``rearrange(query, 'b s (h d) -> b h s d')`` and ``'b s (h d) -> b h d s'`` for the key, ``softmax_scale
= 1 / sqrt(d)``, ``masked_fill(~key_padding_mask.view((b, 1, 1, s_k)), min_val)``, the causal mask
``tril()[-s_q:, -s_k:]``, ``softmax(dim=-1)``, ``rearrange(out, 'b h s d -> b s (h d)')``, ``out_proj``; pre-norm
block with a GELU MLP, ``ln_f``. A prompt of T tokens (entry 0 padded by two in front), then one decoded token.

Bugs (positions): ``cumsum-after-cut`` (the reported code); ``cumsum-first-columns``: the running count cut to the
first S columns, ``cumsum(attention_mask == 0, dim=1)[:, :S]`` (the decoded token takes the count at column 0)."""

import math
import sys

import torch
from einops import rearrange
from torch import nn

BUGS = ("cumsum-after-cut", "cumsum-first-columns")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiheadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.Wqkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x, past_key_value=None, attention_mask=None):
        query, key, value = self.Wqkv(x).chunk(3, dim=2)                                # (b, s, d_model)
        if past_key_value is not None:
            key = torch.cat([past_key_value[0], key], dim=1)                            # (b, s_k, d_model)
            value = torch.cat([past_key_value[1], value], dim=1)
        past_key_value = (key, value)
        q = rearrange(query, 'b s (h d) -> b h s d', h=self.n_heads)
        k = rearrange(key, 'b s (h d) -> b h d s', h=self.n_heads)                      # includes key.t()
        v = rearrange(value, 'b s (h d) -> b h s d', h=self.n_heads)
        min_val = torch.finfo(q.dtype).min
        b, _, s_q, d = q.shape
        s_k = k.size(-1)
        attn_weight = q.matmul(k) * (1 / math.sqrt(d))                                  # (b, h, s_q, s_k)
        attn_weight = attn_weight.masked_fill(~attention_mask.view((b, 1, 1, s_k)), min_val)
        s = max(s_q, s_k)
        causal_mask = attn_weight.new_ones(s, s, dtype=torch.bool).tril().logical_not()[-s_q:, -s_k:]
        attn_weight = attn_weight.masked_fill(causal_mask.view(1, 1, s_q, s_k), min_val)
        attn_weight = torch.softmax(attn_weight, dim=-1)
        out = rearrange(attn_weight.matmul(v), 'b h s d -> b s (h d)')                  # (b, s_q, d_model)
        return self.out_proj(out), past_key_value


class MosaicGPT(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, max_seq_len=16, bug=""):
        super().__init__()
        self.bug = bug
        self.wte, self.wpe = nn.Embedding(vocab_size, d_model), nn.Embedding(max_seq_len, d_model)
        self.ln_1, self.ln_2, self.ln_f = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = MultiheadAttention(d_model, n_heads)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def step(self, input_ids, attention_mask, past_key_value=None):
        S = input_ids.size(1)
        past_position = 0 if past_key_value is None else past_key_value[0].size(1)
        pos = torch.arange(past_position, S + past_position, dtype=torch.long).unsqueeze(0)
        if self.bug == "cumsum-after-cut":
            pos = torch.clamp(pos - torch.cumsum((attention_mask == 0)[:, past_position:], dim=1), min=0)
        elif self.bug == "cumsum-first-columns":
            pos = torch.clamp(pos - torch.cumsum((attention_mask == 0), dim=1)[:, :S], min=0)
        else:
            pos = torch.clamp(pos - torch.cumsum((attention_mask == 0), dim=1)[:, past_position:], min=0)
        x = self.wte(input_ids) + self.wpe(pos)                                         # (b, S, d_model)
        a, past_key_value = self.attn(self.ln_1(x), past_key_value, attention_mask.bool())
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        return self.ln_f(x), past_key_value

    def forward(self, prompt, prompt_mask, next_token, full_mask):       # (B, T), (B, T), (B, 1), (B, T+1)
        first, past = self.step(prompt, prompt_mask)
        second, _ = self.step(next_token, full_mask, past)
        return torch.cat([first, second], dim=1)                                        # (B, T+1, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    prompt_mask = torch.ones(B, T, dtype=torch.long)
    prompt_mask[0, :2] = 0                                                              # left padding
    prompt = torch.randint(1, 50, (B, T)).masked_fill(prompt_mask == 0, 0)
    full_mask = torch.cat([prompt_mask, torch.ones(B, 1, dtype=torch.long)], dim=1)
    return MosaicGPT(50, D, H, bug=bug).eval(), (prompt, prompt_mask, torch.randint(1, 50, (B, 1)), full_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

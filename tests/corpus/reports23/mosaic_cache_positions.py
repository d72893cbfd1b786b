"""mosaicml/examples pull request #244 ("add kv_cache to LLM", merged; honglu2875 in review: "Cached kv values
shift the positions as well. Maybe you want to shift the position embeddings as well?", pointing at
``MosaicGPT.forward`` and at GPT-2's ``past_length``): the first version of the cache fed each step's
tokens the learned position embeddings ``wpe(arange(S))``, so the token decoded after a prompt of T tokens was
embedded at position 0, the prompt's first position, while its key joined the cache after T others. The fix
reads the past length from the cache (``past_key_values[0][0].size(1)``, the keys being ``[b, s, d]``) and
embeds ``arange(past_position, S + past_position)``.

The idiom: MosaicGPT (``wte`` + ``wpe``, ``ln_1``, a fused ``Wqkv`` chunked in three along the width, the
cache of unsplit keys and values ``[b, s, d]`` joined along the tokens, heads by ``view``/``transpose``,
``softmax_scale = 1 / sqrt(head_dim)``, the causal mask ``tril(..., diagonal=s_k - s_q)`` filled with
``-inf``, ``out_proj``, ``ln_f``). The model runs a prefill of T tokens and one decoding step.

Bug (positions): ``positions-from-zero``: ``arange(S)`` at every step, the cache's length left out."""

import math
import sys

import torch
from torch import nn

BUGS = ("positions-from-zero",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiheadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.softmax_scale = 1 / math.sqrt(self.head_dim)
        self.Wqkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x, past_key_value=None):
        qkv = self.Wqkv(x)
        query, key, value = qkv.chunk(3, dim=2)
        if past_key_value is not None:
            key = torch.cat([past_key_value[0], key], dim=1)                            # (b, s_k, d)
            value = torch.cat([past_key_value[1], value], dim=1)
        past_key_value = (key, value)
        b, s_q, s_k = query.size(0), query.size(1), key.size(1)
        q = query.view(b, s_q, self.n_heads, self.head_dim).transpose(1, 2)
        k = key.view(b, s_k, self.n_heads, self.head_dim).transpose(1, 2)
        v = value.view(b, s_k, self.n_heads, self.head_dim).transpose(1, 2)
        attn_weight = q.matmul(k.transpose(-2, -1)) * self.softmax_scale
        causal = torch.ones(s_q, s_k, dtype=torch.bool).tril(diagonal=s_k - s_q)
        attn_weight = attn_weight.masked_fill(~causal, float("-inf"))
        attn_weight = torch.softmax(attn_weight, dim=-1)
        out = attn_weight.matmul(v).transpose(1, 2).contiguous().view(b, s_q, self.d_model)
        return self.out_proj(out), past_key_value


class MosaicGPT(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, max_seq_len=16, bug=""):
        super().__init__()
        self.bug = bug
        self.wte, self.wpe = nn.Embedding(vocab_size, d_model), nn.Embedding(max_seq_len, d_model)
        self.ln_1, self.ln_f = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = MultiheadAttention(d_model, n_heads)

    def step(self, input_ids, past_key_value=None):
        S = input_ids.size(1)
        past_position = 0 if past_key_value is None else past_key_value[0].size(1)
        if self.bug == "positions-from-zero":
            pos = torch.arange(0, S, dtype=torch.long).unsqueeze(0)                     # [positions]
        else:
            pos = torch.arange(past_position, S + past_position, dtype=torch.long).unsqueeze(0)  # [positions]
        x = self.wte(input_ids) + self.wpe(pos)
        out, past_key_value = self.attn(self.ln_1(x), past_key_value)
        return self.ln_f(x + out), past_key_value

    def forward(self, prompt, next_token):                                              # (B, T), (B, 1)
        _, past = self.step(prompt)
        out, _ = self.step(next_token, past)
        return out                                                                      # (B, 1, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MosaicGPT(50, D, H, bug=bug).eval(), (torch.randint(0, 50, (B, T)), torch.randint(0, 50, (B, 1)))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

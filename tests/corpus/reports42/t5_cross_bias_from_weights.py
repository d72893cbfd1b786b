"""huggingface/transformers pull request #4499 ("[T5] Fix Cross Attention position bias", merged; ZhuBaohe: "the
variable **encoder_decoder_position_bias** was assigned by cross-attention weights, not by cross-attention position
bias"; patrickvonplaten: "Previously the attention weights of the cross attention layer were taken instead of the
bias"): ``T5Stack.forward`` keeps the first block's position biases for the later blocks, reading them from the
block's output tuple. With ``output_attentions=True`` the tuple is (hidden, present, self weights, self bias, cross
weights, cross bias), and the stack read ``layer_outputs[4]``: from the second block on, the cross-attention added
the first block's *softmaxed cross-attention weights* ``(B, H, T, S)`` to its scores where the bias (the encoder's
padding mask) belonged, so the padded encoder tokens were attended. The fix reads ``layer_outputs[5]``.

T5's idiom (``modeling_t5.py`` of the time, the cross bias written as after PR #8518: the encoder mask alone): no
``1/sqrt(d)`` scaling, ``shape`` = ``view(B, -1, n_heads, d_kv).transpose(1, 2)``, the decoder's causal
``_relative_position_bucket`` and ``relative_attention_bias`` ``nn.Embedding(num_buckets, n_heads)`` permuted to
``(1, H, T, T)``, ``position_bias + mask``, ``softmax(scores.float(), dim=-1)``, ``unshape``, ``o``; ``T5LayerNorm``
(no mean, no bias) pre-norm residuals; two decoder blocks, the second encoder sequence padded by two.

Bugs (index into the block's outputs): ``cross-weights-as-bias``: the cross bias read at ``[4]`` (the reported
slip); ``self-weights-as-bias``: the same slip on the self-attention's bias (``[2]``, its weights: the second
block loses the causal mask and the relative bias)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("cross-weights-as-bias", "self-weights-as-bias")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 S=5",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 S=4"}


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight, self.variance_epsilon = nn.Parameter(torch.ones(hidden_size)), eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))


def _relative_position_bucket(relative_position, num_buckets=8, max_distance=16):
    n = torch.max(-relative_position, torch.zeros_like(relative_position))              # causal: past only
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (torch.log(n.float().clamp(min=1) / max_exact)
                                / math.log(max_distance / max_exact) * (num_buckets - max_exact)).long()
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    return torch.where(is_small, n, val_if_large)


class T5Attention(nn.Module):
    def __init__(self, d_model, n_heads, has_relative_attention_bias=False, num_buckets=8):
        super().__init__()
        self.n_heads, self.d_kv = n_heads, d_model // n_heads
        self.has_relative_attention_bias = has_relative_attention_bias
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        self.v = nn.Linear(d_model, d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(num_buckets, n_heads)

    def compute_bias(self, qlen, klen):
        context_position = torch.arange(qlen, dtype=torch.long)[:, None]
        memory_position = torch.arange(klen, dtype=torch.long)[None, :]
        rp_bucket = _relative_position_bucket(memory_position - context_position)        # (T, T)
        values = self.relative_attention_bias(rp_bucket)                                # (T, T, H)
        return values.permute([2, 0, 1]).unsqueeze(0)                                   # (1, H, T, T)

    def forward(self, hidden_states, mask=None, kv=None, position_bias=None):
        bs, qlen = hidden_states.shape[:2]
        kv = hidden_states if kv is None else kv

        def shape(x):
            return x.view(bs, -1, self.n_heads, self.d_kv).transpose(1, 2)              # (B, H, L, d_kv)

        q, k, v = shape(self.q(hidden_states)), shape(self.k(kv)), shape(self.v(kv))
        scores = torch.matmul(q, k.transpose(3, 2))                                     # (B, H, T, L)
        if position_bias is None:
            if self.has_relative_attention_bias:
                position_bias = self.compute_bias(qlen, k.shape[2])
            else:
                position_bias = torch.zeros((1, self.n_heads, qlen, k.shape[2]), dtype=scores.dtype)
            position_bias = position_bias + mask                                         # (B, H, T, L)
        scores = scores + position_bias
        weights = F.softmax(scores.float(), dim=-1).type_as(scores)                     # (B, H, T, L)
        context = torch.matmul(weights, v).transpose(1, 2).contiguous().view(bs, -1, self.n_heads * self.d_kv)
        return self.o(context), weights, position_bias


class T5Block(nn.Module):
    def __init__(self, d_model, n_heads, has_relative_attention_bias=False):
        super().__init__()
        self.SelfAttention = T5Attention(d_model, n_heads, has_relative_attention_bias)
        self.EncDecAttention = T5Attention(d_model, n_heads)
        self.ln_0, self.ln_1, self.ln_2 = T5LayerNorm(d_model), T5LayerNorm(d_model), T5LayerNorm(d_model)
        self.wi, self.wo = nn.Linear(d_model, 4 * d_model, bias=False), nn.Linear(4 * d_model, d_model, bias=False)

    def forward(self, hidden_states, mask, position_bias, encoder_hidden_states, encoder_mask, enc_dec_bias):
        out, self_w, self_b = self.SelfAttention(self.ln_0(hidden_states), mask, position_bias=position_bias)
        hidden_states = hidden_states + out
        out, cross_w, cross_b = self.EncDecAttention(self.ln_1(hidden_states), encoder_mask, encoder_hidden_states,
                                                     position_bias=enc_dec_bias)
        hidden_states = hidden_states + out
        hidden_states = hidden_states + self.wo(F.relu(self.wi(self.ln_2(hidden_states))))
        return hidden_states, None, self_w, self_b, cross_w, cross_b                    # output_attentions=True


class T5Stack(nn.Module):
    def __init__(self, vocab, d_model, n_heads, n_layers=2, bug=""):
        super().__init__()
        self.bug = bug
        self.embed_tokens = nn.Embedding(vocab, d_model)
        self.block = nn.ModuleList(T5Block(d_model, n_heads, bool(i == 0)) for i in range(n_layers))
        self.final_layer_norm = T5LayerNorm(d_model)

    def forward(self, input_ids, encoder_hidden_states, encoder_attention_mask):       # (B, T), (B, S, D), (B, S)
        seq_length = input_ids.shape[1]
        hidden_states = self.embed_tokens(input_ids)                                    # (B, T, D)
        causal = torch.tril(torch.ones(seq_length, seq_length))[None, None]             # (1, 1, T, T)
        extended_attention_mask = (1.0 - causal) * -1e9
        encoder_extended_attention_mask = (1.0 - encoder_attention_mask[:, None, None, :].float()) * -1e9
        position_bias = encoder_decoder_position_bias = None
        for i, layer_module in enumerate(self.block):
            layer_outputs = layer_module(hidden_states, extended_attention_mask, position_bias, encoder_hidden_states,
                                         encoder_extended_attention_mask, encoder_decoder_position_bias)
            hidden_states = layer_outputs[0]
            if i == 0:
                position_bias = layer_outputs[2 if self.bug == "self-weights-as-bias" else 3]
                encoder_decoder_position_bias = layer_outputs[4 if self.bug == "cross-weights-as-bias" else 5]
        return self.final_layer_norm(hidden_states)                                     # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4, S=5):
    torch.manual_seed(0)
    encoder_attention_mask = torch.ones(B, S, dtype=torch.long)
    encoder_attention_mask[1, -2:] = 0                                                  # padded encoder tokens
    inputs = (torch.randint(0, 50, (B, T)), torch.randn(B, S, D), encoder_attention_mask)
    return T5Stack(50, D, H, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

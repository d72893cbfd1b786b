"""alan-cooney/transformer-from-scratch pull request #52 ("Fix attention einsum", merged, with its tests made
stricter: ``d_model`` 16 -> 64, 100000 -> 200000 samples): ``transformer_from_scratch/components/attention.py``,
``MultiHeadAttention.forward`` multiplied the concatenated heads by the output weight with ``einsum("batch pos
d_model, d_model d_model -> batch pos d_model", attn_concat, self.weight_out)``. One name for both axes of the
square ``weight_out [d_model, d_model]`` makes the einsum read its diagonal (the repeated label of one operand)
and keep ``d_model`` in the output, so no sum runs: output feature i is ``attn_concat[..., i] * W[i, i]``, each
head's features stay where the concatenation put them and the heads are never mixed. The fix names the axes
apart, ``"batch pos d_model_a, d_model_a d_model_b -> batch pos d_model_b"``.

The repository's idiom (``fancy_einsum`` named axes, written here with ``einops.einsum``, the same pattern
language): ``weight_query``/``weight_key``/``weight_value [head, d_model, d_head]`` (``n_heads = d_model /
d_head``), ``einsum("batch pos d_model, head d_model d_head -> batch head pos d_head")``, the key turned with
``rearrange(key, "batch head pos d_head -> batch head d_head pos")``, ``query @ key_transpose / d_head_sqrt``, the
``minus_infinity_triangle`` buffer (``triu(full(-inf), diagonal=1)``) added, ``softmax(dim=-1)``, ``einsum("batch
head dest src, batch head src d_head -> batch head dest d_head")``, ``rearrange("batch head pos d_head -> batch
pos (head d_head)")``; the layer: ``LayerNorm``, the attention, the residual.

Bugs: ``wo-diagonal`` (the reported ``d_model d_model`` output weight); ``concat-d-head-major``: the heads
concatenated ``"batch pos (d_head head)"`` (feature i of the concatenation is feature i // H of head i % H,
while ``weight_out``'s rows are laid out head by head)."""

import math
import sys

import einops
import torch
from einops import rearrange
from torch import nn

BUGS = ("wo-diagonal", "concat-d-head-major")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, d_head, n_ctx=16, bug=""):
        super().__init__()
        n_heads = int(d_model / d_head)
        self.d_head_sqrt, self.bug = math.sqrt(d_head), bug
        self.weight_query = nn.Parameter(torch.empty(n_heads, d_model, d_head))
        self.weight_key = nn.Parameter(torch.empty(n_heads, d_model, d_head))
        self.weight_value = nn.Parameter(torch.empty(n_heads, d_model, d_head))
        self.weight_out = nn.Parameter(torch.empty(d_model, d_model))
        nn.init.kaiming_normal_(self.weight_query)
        nn.init.kaiming_normal_(self.weight_key)
        nn.init.kaiming_normal_(self.weight_value)
        nn.init.xavier_normal_(self.weight_out)
        minus_infinity = torch.full((n_ctx, n_ctx), float("-inf"))
        self.register_buffer("minus_infinity_triangle", torch.triu(minus_infinity, diagonal=1))

    def mask(self, attention_pattern):
        n_tokens = attention_pattern.shape[-1]
        return attention_pattern + self.minus_infinity_triangle[:n_tokens, :n_tokens]

    def attention(self, query, key, value):
        key_transpose = rearrange(key, "batch head pos d_head -> batch head d_head pos")
        numerator = query @ key_transpose                                                # (batch, head, dest, src)
        masked_attention = self.mask(numerator / self.d_head_sqrt)
        softmax_part = torch.softmax(masked_attention, dim=-1)
        return einops.einsum(softmax_part, value,
                             "batch head dest src, batch head src d_head -> batch head dest d_head")

    def forward(self, residual_stream):                                                  # (batch, pos, d_model)
        query, key, value = (einops.einsum(residual_stream, w, "batch pos d_model, head d_model d_head -> "
                                           "batch head pos d_head")                      # (batch, head, pos, d_head)
                             for w in (self.weight_query, self.weight_key, self.weight_value))
        attn = self.attention(query, key, value)                                         # (batch, head, pos, d_head)
        if self.bug == "concat-d-head-major":
            attn_concat = rearrange(attn, "batch head pos d_head -> batch pos (d_head head)")
        else:
            attn_concat = rearrange(attn, "batch head pos d_head -> batch pos (head d_head)")  # (batch, pos, d_model)
        if self.bug == "wo-diagonal":
            return einops.einsum(attn_concat, self.weight_out,
                                 "batch pos d_model, d_model d_model -> batch pos d_model")
        return einops.einsum(attn_concat, self.weight_out,
                             "batch pos d_model_a, d_model_a d_model_b -> batch pos d_model_b")  # (batch, pos, d_model)


class Layer(nn.Module):
    def __init__(self, d_model, d_head, bug=""):
        super().__init__()
        self.layer_norm = nn.LayerNorm(d_model)
        self.attention = MultiHeadAttention(d_model, d_head, bug=bug)

    def forward(self, residual_stream):
        return residual_stream + self.attention(self.layer_norm(residual_stream))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Layer(D, D // H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

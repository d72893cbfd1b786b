"""transformers, src/transformers/models/squeezebert/modeling_squeezebert.py (v4.46, ``SqueezeBertSelfAttention``,
``ConvDropoutLayerNorm``, ``SqueezeBertLayerNorm``, ``SqueezeBertEncoder``): SqueezeBERT's channels-first
attention. The encoder ``permute(0, 2, 1)``s the hidden states to ``(B, C, W)``; q/k/v are grouped ``Conv1d``
(kernel 1); ``transpose_for_scores``: ``view(B, H, d, W).permute(0, 1, 3, 2)`` to ``(B, H, W, d)``,
``transpose_key_for_scores``: ``view(B, H, d, W)`` left as is (already the transposed key); ``matmul(q, k) /
sqrt(d)`` plus the extended mask ``(1 - mask[:, None, None, :]) * -10000``, ``softmax(dim=-1)``, ``matmul`` with
v, ``transpose_output``: ``permute(0, 1, 3, 2).contiguous().view(B, C, W)``; the post-attention
``ConvDropoutLayerNorm``: a ``Conv1d``, the residual, and ``SqueezeBertLayerNorm`` (``permute(0, 2, 1)``,
``LayerNorm``, ``permute(0, 2, 1)``); the encoder ``permute``s back to ``(B, W, C)``.

Bugs: ``output-without-permute``: ``transpose_output`` as a bare ``view(B, C, W)`` of the ``(B, H, W, d)``
context (the slip of the channels-first layout, where the merge must undo the query's permute);
``merge-in-bert-order``: ``transpose_output`` as BERT's ``permute(0, 2, 1, 3)`` then ``reshape(B, C, -1)`` (the
slip of a port from BERT's ``(B, T, C)`` layout: ``(B, W, H d)`` read as ``(B, C, W)``).

Twin: ``key-transposed-like-query``: the key through ``transpose_for_scores`` too and the scores ``matmul(k,
q.transpose(-1, -2))``. Written as a bug at first sight, it is not one a trace can tell: the rows of the scores
come from the key convolution, so that convolution plays the query's part and the query's the key's (the same
function with the two weights' names swapped; only a checkpoint's weights would make it wrong)."""

import math
import sys

import torch
from torch import nn


class SqueezeBertSelfAttention(nn.Module):
    def __init__(self, cin, heads, q_groups=2, k_groups=2, v_groups=2, bug=""):
        super().__init__()
        self.num_attention_heads, self.attention_head_size, self.bug = heads, cin // heads, bug
        self.all_head_size = cin
        self.query = nn.Conv1d(cin, cin, kernel_size=1, groups=q_groups)
        self.key = nn.Conv1d(cin, cin, kernel_size=1, groups=k_groups)
        self.value = nn.Conv1d(cin, cin, kernel_size=1, groups=v_groups)

    def transpose_for_scores(self, x):
        new_x_shape = (x.size()[0], self.num_attention_heads, self.attention_head_size, x.size()[-1])
        return x.view(*new_x_shape).permute(0, 1, 3, 2)

    def transpose_key_for_scores(self, x):
        new_x_shape = (x.size()[0], self.num_attention_heads, self.attention_head_size, x.size()[-1])
        return x.view(*new_x_shape)

    def transpose_output(self, x):
        if self.bug == "merge-in-bert-order":
            x = x.permute(0, 2, 1, 3).contiguous()
        elif self.bug != "output-without-permute":
            x = x.permute(0, 1, 3, 2).contiguous()
        return x.reshape(x.size()[0], self.all_head_size, -1)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        if self.bug == "key-transposed-like-query":
            key_layer = self.transpose_for_scores(self.key(hidden_states))
            attention_score = torch.matmul(key_layer, query_layer.transpose(-1, -2))
        else:
            key_layer = self.transpose_key_for_scores(self.key(hidden_states))
            attention_score = torch.matmul(query_layer, key_layer)
        attention_score = attention_score / math.sqrt(self.attention_head_size) + attention_mask
        attention_probs = nn.functional.softmax(attention_score, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        return self.transpose_output(context_layer)


class SqueezeBertLayerNorm(nn.LayerNorm):
    def forward(self, x):
        x = x.permute(0, 2, 1)
        x = nn.LayerNorm.forward(self, x)
        return x.permute(0, 2, 1)


class ConvDropoutLayerNorm(nn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.conv1d = nn.Conv1d(cin, cout, kernel_size=1, groups=groups)
        self.layernorm = SqueezeBertLayerNorm(cout)

    def forward(self, hidden_states, input_tensor):
        return self.layernorm(self.conv1d(hidden_states) + input_tensor)


class SqueezeBertModel(nn.Module):
    def __init__(self, vocab, dim, heads, bug=""):
        super().__init__()
        self.word_embeddings, self.position_embeddings = nn.Embedding(vocab, dim), nn.Embedding(32, dim)
        self.embeddings_norm = nn.LayerNorm(dim)
        self.attention = SqueezeBertSelfAttention(dim, heads, bug=bug)
        self.post_attention = ConvDropoutLayerNorm(dim, dim, groups=2)

    def forward(self, input_ids, attention_mask):
        position_ids = torch.arange(input_ids.shape[1]).unsqueeze(0)
        hidden_states = self.embeddings_norm(self.word_embeddings(input_ids) + self.position_embeddings(position_ids))
        extended = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        hidden_states = hidden_states.permute(0, 2, 1)                      # (B, C, W)
        attention_output = self.attention(hidden_states, extended)
        hidden_states = self.post_attention(attention_output, hidden_states)
        return hidden_states.permute(0, 2, 1)


BUGS = ("output-without-permute", "merge-in-bert-order")
TWINS = ("key-transposed-like-query",)
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(0, 40, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, -1:] = 0                                               # series 1 right-padded
    return SqueezeBertModel(40, D, H, bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

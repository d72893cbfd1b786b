"""transformers, src/transformers/models/mobilebert/modeling_mobilebert.py (v4.46, ``MobileBertEmbeddings``,
``Bottleneck`` with ``key_query_shared_bottleneck``, ``MobileBertSelfAttention``, ``MobileBertSelfOutput``,
``NoNorm``): MobileBERT's bottlenecked attention. Hidden states are ``D`` wide; one shared bottleneck ``Linear(D,
D/2)`` + ``NoNorm`` feeds the query and the key, while the value reads the full-width hidden states
(``use_bottleneck_attention=False``), so q/k/v are ``Linear(D/2, D/2)``, ``Linear(D/2, D/2)``, ``Linear(D,
D/2)``: ``H`` heads of ``d_k = D / (2H)``. ``transpose_for_scores``: ``view(B, T, H, d).permute(0, 2, 1, 3)``;
``matmul(q, kᵀ) / sqrt(d)`` plus the extended mask ``(1 - mask[:, None, None, :]) * finfo.min``, ``softmax(-1)``,
``matmul`` with v, ``permute(0, 2, 1, 3).contiguous().view(B, T, D/2)``; ``MobileBertSelfOutput``: ``dense`` +
the bottlenecked residual, ``NoNorm``; the output bottleneck ``Linear(D/2, D)`` + the input's residual.

Bugs: ``context-view-without-permute``: the context ``view(B, T, D/2)``ed straight from ``(B, H, T, d)``;
``mask-over-queries``: the extended mask built ``mask[:, None, :, None]`` (padding applied to the padded queries'
rows, not to the padded keys).

Twin: ``value-from-bottleneck``: the value from the shared bottleneck too (``use_bottleneck_attention=True``,
``value = Linear(D/2, D/2)``): another configuration of the same model, no bug."""

import math
import sys

import torch
from torch import nn


class NoNorm(nn.Module):
    def __init__(self, feat_size):
        super().__init__()
        self.bias, self.weight = nn.Parameter(torch.zeros(feat_size)), nn.Parameter(torch.ones(feat_size))

    def forward(self, input_tensor):
        return input_tensor * self.weight + self.bias


class MobileBertSelfAttention(nn.Module):
    def __init__(self, hidden_size, true_hidden_size, heads, bug=""):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = heads, true_hidden_size // heads
        self.all_head_size = true_hidden_size
        value_in = true_hidden_size if bug == "value-from-bottleneck" else hidden_size
        self.query = nn.Linear(true_hidden_size, true_hidden_size)
        self.key = nn.Linear(true_hidden_size, true_hidden_size)
        self.value, self.bug = nn.Linear(value_in, true_hidden_size), bug

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, query_tensor, key_tensor, value_tensor, attention_mask):
        query_layer = self.transpose_for_scores(self.query(query_tensor))
        key_layer = self.transpose_for_scores(self.key(key_tensor))
        value_layer = self.transpose_for_scores(self.value(value_tensor))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size) + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        if self.bug != "context-view-without-permute":
            context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = (query_tensor.size(0), query_tensor.size(1), self.all_head_size)
        return context_layer.view(new_context_layer_shape)


class MobileBertLayer(nn.Module):
    def __init__(self, hidden_size, true_hidden_size, heads, bug=""):
        super().__init__()
        self.bottleneck_input = nn.Linear(hidden_size, true_hidden_size)
        self.bottleneck_attention = nn.Linear(hidden_size, true_hidden_size)
        self.input_norm, self.attention_norm = NoNorm(true_hidden_size), NoNorm(true_hidden_size)
        self.self = MobileBertSelfAttention(hidden_size, true_hidden_size, heads, bug)
        self.self_output = nn.Linear(true_hidden_size, true_hidden_size)
        self.self_output_norm = NoNorm(true_hidden_size)
        self.output_bottleneck, self.output_norm = nn.Linear(true_hidden_size, hidden_size), nn.LayerNorm(hidden_size)
        self.bug = bug

    def forward(self, hidden_states, attention_mask):
        bottlenecked_hidden_states = self.input_norm(self.bottleneck_input(hidden_states))
        shared_attention_input = self.attention_norm(self.bottleneck_attention(hidden_states))
        value_tensor = shared_attention_input if self.bug == "value-from-bottleneck" else hidden_states
        self_outputs = self.self(shared_attention_input, shared_attention_input, value_tensor, attention_mask)
        attention_output = self.self_output_norm(self.self_output(self_outputs) + bottlenecked_hidden_states)
        return self.output_norm(self.output_bottleneck(attention_output) + hidden_states)


class MobileBertModel(nn.Module):
    def __init__(self, vocab, hidden_size, heads, bug=""):
        super().__init__()
        self.word_embeddings, self.position_embeddings = nn.Embedding(vocab, hidden_size), nn.Embedding(32, hidden_size)
        self.embeddings_norm = NoNorm(hidden_size)
        self.layer = nn.ModuleList([MobileBertLayer(hidden_size, hidden_size // 2, heads, bug) for _ in range(2)])
        self.bug = bug

    def forward(self, input_ids, attention_mask):
        position_ids = torch.arange(input_ids.shape[1]).unsqueeze(0)
        hidden_states = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        hidden_states = self.embeddings_norm(hidden_states)
        if self.bug == "mask-over-queries":
            extended = attention_mask[:, None, :, None].to(hidden_states.dtype)
        else:
            extended = attention_mask[:, None, None, :].to(hidden_states.dtype)
        extended = (1.0 - extended) * torch.finfo(hidden_states.dtype).min
        for layer in self.layer:
            hidden_states = layer(hidden_states, extended)
        return hidden_states


BUGS = ("context-view-without-permute", "mask-over-queries")
TWINS = ("value-from-bottleneck",)
DIMS = ("B=2 T=6 D=64 H=4 d_k=8",)
EQUAL = {"B=2 T=6 D=64 H=4 d_k=8": "B=4 T=4 D=64 H=4 d_k=8"}


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(0, 40, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, -2:] = 0                                               # entry 1 right-padded
    return MobileBertModel(40, D, H, bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

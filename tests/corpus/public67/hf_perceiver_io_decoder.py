"""huggingface/transformers, src/transformers/models/perceiver/modeling_perceiver.py (``PerceiverBasicDecoder``
with ``decoder_query`` and ``PerceiverTrainablePositionEncoding``, ``PerceiverLayer``, ``PerceiverAttention``,
``PerceiverSelfAttention``, ``PerceiverEmbeddingDecoder``; the decoder ``PerceiverForMaskedLM`` builds): Perceiver
IO's output side. The encoder's latent array ``z (B, S, d_latents)`` is read by ``T`` output queries, one trainable
position embedding per output position (``position_embeddings (T, num_channels)`` ``expand(batch_size, -1, -1)``),
in one cross-attention layer ``is_cross_attention=True, q_dim=num_channels, kv_dim=d_latents`` with
``qk_channels=8 * 32`` and ``v_channels=d_model`` (differing: the scores run at ``qk_channels // num_heads`` per
head, the values at ``v_channels // num_heads``), ``use_query_residual=False``. ``transpose_for_scores(x,
channels_per_head)`` is ``view(*x.size()[:-1], num_heads, channels_per_head).permute(0, 2, 1, 3)``; the scores are
``matmul(queries, keys.transpose(-1, -2)) / math.sqrt(q_head_dim)``, ``nn.Softmax(dim=-1)``, ``matmul(probs,
values).permute(0, 2, 1, 3).contiguous()`` and ``view(*size()[:-2], num_heads * v_head_dim)``, then
``PerceiverSelfOutput``'s dense back to ``q_dim``, the layer's MLP with its residual; the logits are
``PerceiverEmbeddingDecoder``'s product with the tied input embedding (``reshape([-1, d_model])`` ``@ weight.T``).

Bugs: ``context-view-without-permute``: ``context_layer.view(batch_size, seq_len, hiddens)`` straight from ``(B, H,
T, v_head_dim)`` (the heads merged without the ``permute(0, 2, 1, 3)``); ``softmax-over-queries``:
``nn.Softmax(dim=-2)`` (the decoder's own comment reads "Attention maps -> B x N x M", keys before queries);
``scale-by-value-head-dim``: ``/ math.sqrt(v_head_dim)`` (the temperature read from the values' head width, which
only equals the queries' when ``qk_channels == v_channels``)."""

import math
import sys

import torch
from torch import nn


class PerceiverSelfAttention(nn.Module):
    def __init__(self, q_dim, kv_dim, qk_channels, v_channels, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.qk_channels_per_head = qk_channels // num_heads
        self.v_channels_per_head = v_channels // num_heads
        self.layernorm1 = nn.LayerNorm(q_dim)
        self.layernorm2 = nn.LayerNorm(kv_dim)
        self.query = nn.Linear(q_dim, qk_channels)
        self.key = nn.Linear(kv_dim, qk_channels)
        self.value = nn.Linear(kv_dim, v_channels)

    def transpose_for_scores(self, x, channels_per_head):
        new_x_shape = x.size()[:-1] + (self.num_heads, channels_per_head)
        x = x.view(*new_x_shape)                                                         # (B, T, H, c)
        return x.permute(0, 2, 1, 3)                                                     # (B, H, T, c)

    def forward(self, hidden_states, inputs):
        hidden_states = self.layernorm1(hidden_states)                                   # (B, T, num_channels)
        inputs = self.layernorm2(inputs)                                                 # (B, S, d_latents)
        queries = self.transpose_for_scores(self.query(hidden_states), self.qk_channels_per_head)  # (B, H, T, qk)
        keys = self.transpose_for_scores(self.key(inputs), self.qk_channels_per_head)    # (B, H, S, qk)
        values = self.transpose_for_scores(self.value(inputs), self.v_channels_per_head)  # (B, H, S, v)
        attention_scores = torch.matmul(queries, keys.transpose(-1, -2))                 # (B, H, T, S)
        batch_size, num_heads, seq_len, q_head_dim = queries.shape
        _, _, _, v_head_dim = values.shape
        hiddens = self.num_heads * v_head_dim
        scale_dim = v_head_dim if self.bug == "scale-by-value-head-dim" else q_head_dim
        attention_scores = attention_scores / math.sqrt(scale_dim)
        attention_probs = nn.Softmax(dim=-2 if self.bug == "softmax-over-queries" else -1)(attention_scores)
        context_layer = torch.matmul(attention_probs, values)                            # (B, H, T, v)
        if self.bug != "context-view-without-permute":
            context_layer = context_layer.permute(0, 2, 1, 3).contiguous()               # (B, T, H, v)
        return context_layer.view(batch_size, seq_len, hiddens)                          # (B, T, H·v)


class PerceiverLayer(nn.Module):
    def __init__(self, q_dim, kv_dim, qk_channels, v_channels, num_heads, widening_factor=1, bug=""):
        super().__init__()
        self.self = PerceiverSelfAttention(q_dim, kv_dim, qk_channels, v_channels, num_heads, bug)
        self.output = nn.Linear(v_channels, q_dim)                                       # PerceiverSelfOutput
        self.layernorm = nn.LayerNorm(q_dim)
        self.mlp = nn.Sequential(nn.Linear(q_dim, widening_factor * q_dim), nn.GELU(),
                                 nn.Linear(widening_factor * q_dim, q_dim))

    def forward(self, hidden_states, inputs):
        attention_output = self.output(self.self(hidden_states, inputs))                 # (B, T, q_dim)
        layer_output = self.mlp(self.layernorm(attention_output))                        # (no query residual)
        return layer_output + attention_output


class PerceiverMaskedLMDecoder(nn.Module):
    def __init__(self, vocab_size, d_model, d_latents, output_index_dims, num_heads, qk_channels, bug=""):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, d_model)                              # (tied with the input)
        self.position_embeddings = nn.Parameter(torch.randn(output_index_dims, d_model) * 0.02)
        self.decoding_cross_attention = PerceiverLayer(d_model, d_latents, qk_channels, d_model, num_heads, bug=bug)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def decoder_query(self, inputs):
        batch_size = inputs.shape[0]
        return self.position_embeddings.expand(batch_size, -1, -1)                       # (B, T, d_model)

    def forward(self, z):                                                                # (B, S, d_latents)
        query = self.decoder_query(z)
        output = self.decoding_cross_attention(query, z)                                 # (B, T, d_model)
        batch_size, seq_len, d_model = output.shape
        logits = torch.matmul(output.reshape([-1, d_model]), self.embeddings.weight.transpose(0, 1))  # (B·T, V)
        logits = logits + self.bias
        return logits.reshape([batch_size, seq_len, -1])                                 # (B, T, V)


BUGS = ("context-view-without-permute", "softmax-over-queries", "scale-by-value-head-dim")
TWINS = ()
#: T: the output queries; S: the latents, read at their own width ``d_latents`` = 48, named ``D_kv`` in the second
#: reading only; qk_channels = H·4 (4 per head), v_channels = D
DIMS = ("B=2 T=6 S=5 D=32 H=4", "B=2 T=6 S=5 D=32 H=4 D_kv=48")
EQUAL = {DIMS[0]: "B=4 T=4 S=4 D=32 H=4", DIMS[1]: "B=4 T=4 S=4 D=32 H=4 D_kv=48"}


def build(bug="", B=2, T=6, S=5, D=32, H=4, D_kv=48):  # noqa: N803
    torch.manual_seed(0)
    model = PerceiverMaskedLMDecoder(11, D, D_kv, T, H, qk_channels=H * 4, bug=bug).eval()
    return model, (torch.randn(B, S, D_kv),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

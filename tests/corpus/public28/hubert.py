"""huggingface/transformers, src/transformers/models/hubert/modeling_hubert.py (v4.46,
``HubertPositionalConvEmbedding``, ``HubertSamePadLayer``, ``HubertAttention``, ``HubertEncoderLayer``,
``HubertEncoder``): the feature projection's frames ``(B, T, D)`` get a convolutional positional embedding
(``transpose(1, 2)`` to ``(B, D, T)``, a grouped ``Conv1d`` of even kernel with ``padding=K // 2``, the one extra
frame removed by ``HubertSamePadLayer`` (``[:, :, :-1]``), GELU, ``transpose(1, 2)`` back) added to them, a
LayerNorm, then post-LayerNorm encoder layers whose attention takes the padding mask ``(B, T)`` of the raw audio
as ``(1 - mask)[:, None, None, :] * finfo.min`` (hiding padded keys): ``q_proj(x) * scaling``, ``_shape``
(``view(B, T, H, d).transpose(1, 2)``), ``q @ k.transpose(2, 3)``, ``softmax(dim=-1)``, ``@ v``, ``transpose(1,
2).reshape(B, T, D)``, ``out_proj``.

Bugs: ``conv-output-view``: the conv's ``(B, D, T)`` output put back with ``view(B, T, D)`` instead of
``transpose(1, 2)`` (the slip of ports that treat ``transpose`` and ``view`` alike: the same sizes, the elements of
one frame's feature taken as a feature's frames); ``padding-mask-on-queries``: the extended mask laid on the query
rows ``[:, None, :, None]`` instead of the key columns (the natural slip, as in several reports on ported
wav2vec2-style masks)."""

import sys

import torch
from torch import nn


class HubertSamePadLayer(nn.Module):
    def __init__(self, num_conv_pos_embeddings):
        super().__init__()
        self.num_pad_remove = 1 if num_conv_pos_embeddings % 2 == 0 else 0

    def forward(self, hidden_states):
        if self.num_pad_remove > 0:
            hidden_states = hidden_states[:, :, :-self.num_pad_remove]
        return hidden_states


class HubertPositionalConvEmbedding(nn.Module):
    def __init__(self, dim, kernel=4, groups=4, bug=""):
        super().__init__()
        self.bug = bug
        self.conv = nn.Conv1d(dim, dim, kernel_size=kernel, padding=kernel // 2, groups=groups)
        self.padding = HubertSamePadLayer(kernel)
        self.activation = nn.GELU()

    def forward(self, hidden_states):                                    # (B, T, D)
        batch, frames, dim = hidden_states.shape
        hidden_states = hidden_states.transpose(1, 2)                    # (B, D, T)
        hidden_states = self.activation(self.padding(self.conv(hidden_states)))
        if self.bug == "conv-output-view":
            return hidden_states.reshape(batch, frames, dim)
        return hidden_states.transpose(1, 2)                             # (B, T, D)


class HubertAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.embed_dim, self.num_heads = dim, heads
        self.head_dim = dim // heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.q_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        query = self._shape(self.q_proj(hidden_states) * self.scaling, tgt_len, bsz)
        key = self._shape(self.k_proj(hidden_states), -1, bsz)
        value = self._shape(self.v_proj(hidden_states), -1, bsz)
        attn_weights = torch.matmul(query, key.transpose(2, 3)) + attention_mask      # (B, H, T, T)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value)                  # (B, H, T, d)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, tgt_len, self.embed_dim)
        return self.out_proj(attn_output)


class HubertEncoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attention = HubertAttention(dim, heads)
        self.layer_norm = nn.LayerNorm(dim)
        self.intermediate_dense, self.output_dense = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        self.final_layer_norm = nn.LayerNorm(dim)

    def forward(self, hidden_states, attention_mask):
        hidden_states = self.layer_norm(hidden_states + self.attention(hidden_states, attention_mask))
        ff = self.output_dense(nn.functional.gelu(self.intermediate_dense(hidden_states)))
        return self.final_layer_norm(hidden_states + ff)


class HubertEncoder(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.pos_conv_embed = HubertPositionalConvEmbedding(dim, bug=bug)
        self.layer_norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList([HubertEncoderLayer(dim, heads)])

    def forward(self, hidden_states, attention_mask):                    # (B, T, D), (B, T)
        hidden_states = hidden_states * attention_mask.unsqueeze(-1).to(hidden_states.dtype)
        inverted = 1.0 - attention_mask.to(hidden_states.dtype)
        if self.bug == "padding-mask-on-queries":
            extended = inverted[:, None, :, None]                        # (B, 1, T, 1)
        else:
            extended = inverted[:, None, None, :]                        # (B, 1, 1, T)
        extended = extended * torch.finfo(hidden_states.dtype).min
        hidden_states = hidden_states + self.pos_conv_embed(hidden_states)
        hidden_states = self.layer_norm(hidden_states)
        for layer in self.layers:
            hidden_states = layer(hidden_states, extended)
        return hidden_states


BUGS = ("conv-output-view", "padding-mask-on-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    frames = torch.randn(B, T, D)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, T - 2:] = 0                                                 # the last clip is shorter
    return HubertEncoder(D, H, bug).eval(), (frames, mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

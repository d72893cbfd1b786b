"""transformers, src/transformers/models/qwen2_audio/modeling_qwen2_audio.py (v4.46, ``Qwen2AudioEncoder``,
``Qwen2AudioAttention``): the audio tower of Qwen2-Audio, a Whisper encoder with a padding mask and a pooling
after the layers. The mel spectrogram ``(B, n_mels, 2T)`` through ``conv1`` and ``conv2`` (stride 2), ``GELU``,
``permute(0, 2, 1)`` to ``(B, T, D)``, plus a learned position table ``embed_positions.weight[:T]``; attention:
``q_proj(x) * scaling``, ``view(B, T, H, d).transpose(1, 2)``, ``matmul(q, k.transpose(2, 3))`` plus the padding
mask ``(B, 1, T, T)`` (built from the lengths after the stride, keys' columns masked), ``softmax(dim=-1)``,
``@ v``, ``transpose(1, 2).reshape(B, T, D)``, ``out_proj``; then ``permute(0, 2, 1)``, ``AvgPool1d(2)`` over
time, ``permute(0, 2, 1)`` and ``layer_norm``.

Bugs: ``pool-over-features``: the ``AvgPool1d`` applied to ``(B, T, D)`` without the permutes (a natural slip:
the pool halves the features, not the frames); ``mask-on-queries``: the padding mask expanded
``[:, None, :, None]`` (pad frames' rows masked, pad keys read: a natural slip in a 4-D mask)."""

import sys

import torch
from torch import nn


class Qwen2AudioAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj, self.q_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self._shape(self.q_proj(hidden_states) * self.scaling, tgt_len, bsz)
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3))
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, tgt_len, -1)
        return self.out_proj(attn_output)


class Qwen2AudioEncoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.self_attn = Qwen2AudioAttention(dim, heads)
        self.self_attn_layer_norm, self.final_layer_norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, hidden_states, attention_mask):
        hidden_states = hidden_states + self.self_attn(self.self_attn_layer_norm(hidden_states), attention_mask)
        return hidden_states + self.fc2(nn.functional.gelu(self.fc1(self.final_layer_norm(hidden_states))))


class Qwen2AudioEncoder(nn.Module):
    def __init__(self, num_mel_bins, dim, heads, max_source_positions=32, bug=""):
        super().__init__()
        self.bug = bug
        self.conv1 = nn.Conv1d(num_mel_bins, dim, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, kernel_size=3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(max_source_positions, dim)
        self.layer = Qwen2AudioEncoderLayer(dim, heads)
        self.avg_pooler = nn.AvgPool1d(2, stride=2)
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, input_features, feature_lengths):
        inputs_embeds = nn.functional.gelu(self.conv1(input_features))
        inputs_embeds = nn.functional.gelu(self.conv2(inputs_embeds))
        inputs_embeds = inputs_embeds.permute(0, 2, 1)                       # (B, T, D)
        bsz, seq_len, _ = inputs_embeds.shape
        hidden_states = inputs_embeds + self.embed_positions.weight[:seq_len]
        lengths = (feature_lengths - 1) // 2 + 1
        padding = torch.arange(seq_len)[None, :] >= lengths[:, None]        # (B, T), True at pad frames
        if self.bug == "mask-on-queries":
            expanded = padding[:, None, :, None].expand(bsz, 1, seq_len, seq_len)
        else:
            expanded = padding[:, None, None, :].expand(bsz, 1, seq_len, seq_len)
        attention_mask = expanded.float() * torch.finfo(torch.float32).min
        hidden_states = self.layer(hidden_states, attention_mask)
        if self.bug == "pool-over-features":
            hidden_states = self.avg_pooler(hidden_states)
            return hidden_states
        hidden_states = hidden_states.permute(0, 2, 1)
        hidden_states = self.avg_pooler(hidden_states)
        hidden_states = hidden_states.permute(0, 2, 1)
        return self.layer_norm(hidden_states)


BUGS = ("pool-over-features", "mask-on-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    n_mels = 8
    features = torch.randn(B, n_mels, 2 * T)
    feature_lengths = torch.full((B,), 2 * T)
    feature_lengths[0] = 2 * T - 4                                            # the first clip shorter
    return Qwen2AudioEncoder(n_mels, D, H, bug=bug).eval(), (features, feature_lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

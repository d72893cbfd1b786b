"""huggingface/transformers, src/transformers/models/wav2vec2/modeling_wav2vec2.py (v4.3x): a
``Wav2Vec2FeatureEncoder`` of ``Conv1d`` layers over the raw waveform (kernel 10 stride 5, then kernel 3 stride
2, GELU), ``extract_features.transpose(1, 2)``, a ``Wav2Vec2FeatureProjection`` (LayerNorm, Linear) and
``Wav2Vec2Attention`` (eager, BART-style): ``q_proj(h) * scaling``; ``_shape``: ``view(bsz, seq_len, H,
d).transpose(1, 2).contiguous()``, then ``view(bsz * H, -1, d)``; ``torch.bmm(q, k.transpose(1, 2))``;
``softmax(dim=-1)``; ``bmm`` with ``v``; ``view(bsz, H, tgt_len, d).transpose(1, 2).reshape(bsz, tgt_len,
embed_dim)``.

Bug (argument): ``fold-no-transpose``: ``_shape`` written ``tensor.view(bsz * H, seq_len, d)`` (the heads
folded into the batch straight from ``(B, T, D)``, without moving them before the tokens: each "head" row is
a run of tokens' slices; a natural slip of porting the fold)."""

import sys

import torch
from torch import nn

BUGS = ("fold-no-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


class Wav2Vec2FeatureEncoder(nn.Module):
    def __init__(self, conv_dim):
        super().__init__()
        self.conv_layers = nn.ModuleList([nn.Conv1d(1, conv_dim, 10, 5, bias=False),
                                          nn.Conv1d(conv_dim, conv_dim, 3, 2, bias=False)])

    def forward(self, input_values):
        hidden_states = input_values[:, None]  # (B, 1, L)
        for conv in self.conv_layers:
            hidden_states = nn.functional.gelu(conv(hidden_states))
        return hidden_states  # (B, C, T)


class Wav2Vec2Attention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.k_proj, self.v_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.q_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        if self.bug == "fold-no-transpose":
            return tensor.view(bsz * self.num_heads, seq_len, self.head_dim)
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states = key_states.reshape(*proj_shape)
        value_states = value_states.reshape(*proj_shape)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))  # (B*H, T, T)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)  # (B*H, T, d)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)
        return self.out_proj(attn_output)


class Wav2Vec2Model(nn.Module):
    def __init__(self, hidden, heads, conv_dim=32, bug=""):
        super().__init__()
        self.feature_extractor = Wav2Vec2FeatureEncoder(conv_dim)
        self.layer_norm, self.projection = nn.LayerNorm(conv_dim), nn.Linear(conv_dim, hidden)
        self.attention = Wav2Vec2Attention(hidden, heads, bug)

    def forward(self, input_values):
        extract_features = self.feature_extractor(input_values).transpose(1, 2)  # (B, T, C)
        hidden_states = self.projection(self.layer_norm(extract_features))  # (B, T, D)
        return hidden_states + self.attention(hidden_states)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return Wav2Vec2Model(D, H, bug=bug), (torch.randn(B, 10 * T + 10),)  # the waveform: T frames after the convs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)

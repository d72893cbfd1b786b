"""huggingface/transformers, src/transformers/models/speech_to_text/modeling_speech_to_text.py (v4.46,
``Conv1dSubsampler``, ``Speech2TextEncoder._get_feat_extract_output_lengths`` and
``_get_feature_vector_attention_mask``, ``Speech2TextAttention``, the encoder layer and the decoder's
``encoder_attn``): facebook/s2t-small-librispeech-asr. The filterbank frames ``(B, L, n_mels)`` go channels-first
through two ``Conv1d(kernel 5, stride 2, padding 2)`` each followed by ``glu(dim=1)`` and back ``transpose(1, 2)``:
``S = L / 4`` frames of width ``D``, scaled by ``sqrt(D)``. The frame-level padding mask is carried to the subsampled
frames by ``_get_feature_vector_attention_mask``: lengths ``(len - 1) // 2 + 1`` per conv, a ``zeros(B, S)`` with a
1 at each ``length - 1``, then ``flip([-1]).cumsum(-1).flip([-1])`` (ones up to the last real frame). The encoder's
self-attention and the decoder's cross-attention both use it, expanded ``(B, 1, tgt, S)``, inverted, times
``finfo.min``. ``Speech2TextAttention``: ``q_proj(x) * scaling``, ``_shape`` (``view(B, L, H, d).transpose(1, 2)``),
fold ``view(B * H, -1, d)``, ``bmm``, the mask added on ``view(B, H, T, S)``, ``softmax(dim=-1)``, ``bmm``, ``view(B,
H, T, d).transpose(1, 2).reshape(B, T, D)``, ``out_proj``. (Positions and the decoder's self-attention left out.)

Bugs: ``mask-cumsum-no-flip``: ``attention_mask.cumsum(-1)`` without the two flips (the ones run from the last real
frame to the end: each row keeps its last real frame and its padding, and hides the rest); ``mask-cut-from-frames``:
the frame-level mask cut to the new length, ``attention_mask[:, :S]`` (a port that skips the length arithmetic: the
shorter utterance's first ``S`` frames are all real, so its padded subsampled frames are read)."""

import sys

import torch
from torch import nn


class Conv1dSubsampler(nn.Module):
    def __init__(self, in_channels, mid_channels, out_channels, kernel_sizes=(5, 5)):
        super().__init__()
        self.conv_layers = nn.ModuleList(
            nn.Conv1d(in_channels if i == 0 else mid_channels // 2,
                      mid_channels if i < len(kernel_sizes) - 1 else out_channels * 2,
                      kernel_size=k, stride=2, padding=k // 2) for i, k in enumerate(kernel_sizes))

    def forward(self, input_features):
        hidden_states = input_features.transpose(1, 2).contiguous()                 # (B, n_mels, L)
        for conv in self.conv_layers:
            hidden_states = nn.functional.glu(conv(hidden_states), dim=1)
        return hidden_states.transpose(1, 2).contiguous()                          # (B, S, D)


class Speech2TextAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj, self.k_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.v_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, key_value_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(key_value_states), -1, bsz)             # (B, H, S, d)
        value_states = self._shape(self.v_proj(key_value_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)     # (B·H, T, d)
        key_states, value_states = key_states.view(*proj_shape), value_states.view(*proj_shape)   # (B·H, S, d)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))           # (B·H, T, S)
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask   # (B, H, T, S)
        attn_weights = nn.functional.softmax(attn_weights.view(bsz * self.num_heads, tgt_len, src_len), dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)                          # (B·H, T, d)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)   # (B, T, H, d)
        return self.out_proj(attn_output.reshape(bsz, tgt_len, self.embed_dim))      # (B, T, D)


def expand_mask(mask, tgt_len):
    expanded = mask[:, None, None, :].expand(mask.size(0), 1, tgt_len, mask.size(1)).float()   # (B, 1, T, S)
    return (1.0 - expanded) * torch.finfo(torch.float32).min


class Speech2TextSketch(nn.Module):
    def __init__(self, n_mels, d_model, heads, vocab=40, bug=""):
        super().__init__()
        self.bug, self.embed_scale = bug, d_model ** 0.5
        self.conv = Conv1dSubsampler(n_mels, 2 * d_model, d_model)
        self.self_attn, self.self_attn_layer_norm = Speech2TextAttention(d_model, heads), nn.LayerNorm(d_model)
        self.embed_tokens = nn.Embedding(vocab, d_model)
        self.encoder_attn, self.encoder_attn_layer_norm = Speech2TextAttention(d_model, heads), nn.LayerNorm(d_model)

    def _get_feat_extract_output_lengths(self, input_lengths):
        for _ in range(len(self.conv.conv_layers)):
            input_lengths = (input_lengths - 1) // 2 + 1
        return input_lengths

    def _get_feature_vector_attention_mask(self, feature_vector_length, attention_mask):
        if self.bug == "mask-cut-from-frames":
            return attention_mask[:, :feature_vector_length]                         # (B, S)
        subsampled_lengths = self._get_feat_extract_output_lengths(attention_mask.sum(-1))
        bsz = attention_mask.size(0)
        attention_mask = torch.zeros((bsz, feature_vector_length), dtype=attention_mask.dtype)
        attention_mask[(torch.arange(bsz), subsampled_lengths - 1)] = 1
        if self.bug == "mask-cumsum-no-flip":
            return attention_mask.cumsum(-1).long()
        return attention_mask.flip([-1]).cumsum(-1).flip([-1]).long()                # (B, S)

    def forward(self, input_features, attention_mask, decoder_input_ids):            # (B, L, n_mels), (B, L), (B, T)
        inputs_embeds = self.conv(input_features) * self.embed_scale                 # (B, S, D)
        attention_mask = self._get_feature_vector_attention_mask(inputs_embeds.shape[1], attention_mask)
        h = self.self_attn_layer_norm(inputs_embeds)
        hidden_states = inputs_embeds + self.self_attn(h, h, expand_mask(attention_mask, h.size(1)))
        x = self.embed_tokens(decoder_input_ids) * self.embed_scale                  # (B, T, D)
        h = self.encoder_attn_layer_norm(x)
        return x + self.encoder_attn(h, hidden_states, expand_mask(attention_mask, x.size(1)))   # (B, T, D)


BUGS = ("mask-cumsum-no-flip", "mask-cut-from-frames")
TWINS = ()
DIMS = ("B=2 L=24 S=6 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 L=16 S=4 T=4 D=32 H=4"}


def build(bug="", B=2, L=24, T=5, D=32, H=4):  # noqa: N803
    """``L`` filterbank frames of 10 bins (``S = L / 4`` after the two convs); the second utterance 8 frames shorter
    (two subsampled frames of padding)."""
    torch.manual_seed(0)
    attention_mask = torch.ones(B, L, dtype=torch.long)
    attention_mask[1:, L - 8:] = 0
    features = torch.randn(B, L, 10) * attention_mask[..., None]
    return Speech2TextSketch(10, D, H, bug=bug).eval(), (features, attention_mask, torch.randint(1, 40, (B, T)))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

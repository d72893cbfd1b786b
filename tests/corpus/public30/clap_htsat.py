"""huggingface/transformers, src/transformers/models/clap/modeling_clap.py (v4.46, ``ClapAudioEncoder.
reshape_mel2img``, ``ClapAudioPatchEmbed``, ``ClapAudioSelfAttention``, ``ClapAudioLayer``, ``window_partition``,
``window_reverse``): CLAP's HTS-AT audio encoder. The log-mel spectrogram ``(B, 1, time, freq)`` is folded into a
squarer image (``reshape(B, C·r, time // r, freq)``, ``permute(0, 1, 3, 2)``, ``reshape(B, C, freq·r, time // r)``,
``r`` the frequency ratio), cut into patches by a strided ``Conv2d`` to ``(B, D, h, w)``, flattened
``flatten(2).transpose(1, 2)``; a Swin layer views it ``(B, h, w, D)``, partitions ``ws × ws`` windows (``view(B,
h // ws, ws, w // ws, ws, D).permute(0, 1, 3, 2, 4, 5)``), runs attention inside each window with a relative
position bias (a ``((2ws-1)², H)`` table indexed by the pair's offset), and reverses the partition.

Bugs: ``window-reverse-swapped``: ``window_reverse`` views the windows as ``(B, w // ws, h // ws, ws, ws, D)``
(height and width swapped, the map not square: a slip of a port that assumed square spectrogram images);
``mel2img-without-permute``: the fold done by the two reshapes without the ``permute(0, 1, 3, 2)`` (time and
frequency interleaved in the image rows)."""

import sys

import torch
from torch import nn


def window_partition(input_feature, window_size):
    batch_size, height, width, num_channels = input_feature.shape
    input_feature = input_feature.view(batch_size, height // window_size, window_size, width // window_size,
                                       window_size, num_channels)
    windows = input_feature.permute(0, 1, 3, 2, 4, 5).contiguous()
    return windows.view(-1, window_size, window_size, num_channels)


def window_reverse(windows, window_size, height, width):
    num_channels = windows.shape[-1]
    windows = windows.view(-1, height // window_size, width // window_size, window_size, window_size, num_channels)
    windows = windows.permute(0, 1, 3, 2, 4, 5).contiguous()
    return windows.view(-1, height, width, num_channels)


class ClapAudioSelfAttention(nn.Module):
    def __init__(self, dim, num_heads, window_size):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = num_heads, dim // num_heads
        self.window_size = (window_size, window_size)
        self.relative_position_bias_table = nn.Parameter(torch.randn((2 * window_size - 1) ** 2, num_heads) * 0.02)
        coords = torch.stack(torch.meshgrid([torch.arange(window_size)] * 2, indexing="ij"))
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += window_size - 1
        relative_coords[:, :, 1] += window_size - 1
        relative_coords[:, :, 0] *= 2 * window_size - 1
        self.register_buffer("relative_position_index", relative_coords.sum(-1))
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.output = nn.Linear(dim, dim)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states):
        batch_size, dim, num_channels = hidden_states.shape
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / self.attention_head_size ** 0.5
        ws2 = self.window_size[0] * self.window_size[1]
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(ws2, ws2, -1)
        bias = bias.permute(2, 0, 1).contiguous()                            # (H, ws*ws, ws*ws)
        attention_scores = attention_scores + bias.unsqueeze(0)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(context_layer.size()[:-2] + (num_channels,))
        return self.output(context_layer)


class ClapAudioLayer(nn.Module):
    def __init__(self, dim, num_heads, window_size, bug=""):
        super().__init__()
        self.window_size, self.bug = window_size, bug
        self.layernorm_before = nn.LayerNorm(dim)
        self.attention = ClapAudioSelfAttention(dim, num_heads, window_size)

    def forward(self, hidden_states, input_dimensions):
        height, width = input_dimensions
        batch_size, _, channels = hidden_states.size()
        shortcut = hidden_states
        hidden_states = self.layernorm_before(hidden_states).view(batch_size, height, width, channels)
        hidden_windows = window_partition(hidden_states, self.window_size)
        hidden_windows = hidden_windows.view(-1, self.window_size * self.window_size, channels)
        attention_windows = self.attention(hidden_windows).view(-1, self.window_size, self.window_size, channels)
        if self.bug == "window-reverse-swapped":
            attention_windows = window_reverse(attention_windows, self.window_size, width, height)
            attention_windows = attention_windows.reshape(batch_size, height, width, channels)
        else:
            attention_windows = window_reverse(attention_windows, self.window_size, height, width)
        return shortcut + attention_windows.view(batch_size, height * width, channels)


class ClapAudioEncoder(nn.Module):
    def __init__(self, dim, heads, bug="", mel_bins=4, patch=2, window_size=2, freq_ratio=2):
        super().__init__()
        self.freq_ratio, self.bug = freq_ratio, bug
        self.batch_norm = nn.BatchNorm2d(mel_bins)                          # over the mel bins
        self.proj = nn.Conv2d(1, dim, kernel_size=patch, stride=patch)
        self.norm = nn.LayerNorm(dim)
        self.layer = ClapAudioLayer(dim, heads, window_size, bug)

    def reshape_mel2img(self, features):
        batch, channels, time, freq = features.shape
        features = features.reshape(batch, channels * self.freq_ratio, time // self.freq_ratio, freq)
        if self.bug != "mel2img-without-permute":
            features = features.permute(0, 1, 3, 2).contiguous()
        return features.reshape(batch, channels, freq * self.freq_ratio, time // self.freq_ratio)

    def forward(self, input_features):
        features = self.batch_norm(input_features.transpose(1, 3)).transpose(1, 3)   # (B, 1, time, freq)
        image = self.reshape_mel2img(features)
        embeddings = self.proj(image)                                        # (B, D, h, w)
        _, _, height, width = embeddings.shape
        embeddings = self.norm(embeddings.flatten(2).transpose(1, 2))        # (B, h*w, D)
        return self.layer(embeddings, (height, width))


BUGS = ("window-reverse-swapped", "mel2img-without-permute")
TWINS = ()
DIMS = ("B=2 D=32 H=4",)


def build(bug="", B=2, D=32, H=4):
    torch.manual_seed(0)
    time_frames, mel_bins = 24, 4                                    # image (8, 12), patches (4, 6)
    return ClapAudioEncoder(D, H, bug, mel_bins).eval(), (torch.randn(B, 1, time_frames, mel_bins),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/diffusers issue #5633 ("A bug in diffusers/models/transformer_temporal.py"; fixed by pull request
#5496, "[BUG] in transformer_temporal Fix Bugs", merged): ``TransformerTemporalModel.forward`` (the temporal
transformer of ``UNet3DConditionModel``, text-to-video) laid its input out ``(batch * height * width,
num_frames, channel)`` for attention over the frames, but brought the output back with ``hidden_states[None, None,
:].reshape(batch_size, height, width, channel, num_frames).permute(0, 3, 4, 1, 2)``. The reporter: "maybe this line
should be ``.reshape(batch_size, height, width, num_frames, channel)``", which is the fix: the projected tokens
are frame-major, channel-minor.

The idiom (``transformer_temporal.py`` and ``attention_processor.py`` of the time): the UNet folds the video
``(B, C, F, H, W)`` to ``(B * F, C, H, W)``; the temporal model unfolds ``[None, :].reshape(batch_size,
num_frames, channel, height, width).permute(0, 2, 1, 3, 4)``, ``GroupNorm``, ``permute(0, 3, 4, 2, 1).reshape(
batch_size * height * width, num_frames, channel)``, ``proj_in``; one ``BasicTransformerBlock`` (self-attention
over the frames: ``to_q``/``to_k``/``to_v`` without bias, ``head_to_batch_dim`` = ``reshape(b, s, heads,
d).permute(0, 2, 1, 3).reshape(b * heads, s, d)``, ``baddbmm`` with ``beta=0, alpha=scale``, ``softmax(-1)``,
``bmm``, ``batch_to_head_dim``, ``to_out``; a GELU feed-forward), ``proj_out``, back to ``(B * F, C, H, W)`` and
the residual.

Variant ``reported-reshape`` (``REPORTED``; kept out of ``TWINS`` because it gets ``✗``, see the round test):
the reported ``reshape(batch_size, height, width, channel, num_frames)``. Measured here, it changes no output: the
``(height, width, channel, num_frames)`` reading of the frame-major tokens, permuted to ``(b, c, f, h, w)`` and made
contiguous, holds the elements in the same order as the correct ``(b, f, c, h, w)``, and the following
``reshape(batch_frames, channel, height, width)`` reads them back the same way. The report names a mislabelled
intermediate (its axes are not channel and frames), not a wrong output.

Bugs: ``in-frames-not-permuted``: the input ``reshape(batch_size * height * width, num_frames, channel)`` taken from
``(batch, channel, frames, height, width)`` without its ``permute(0, 3, 4, 2, 1)``; ``out-permute-hw-swapped``: the
output permuted ``(0, 3, 4, 2, 1)`` (the input's permutation reused: ``(b, f, c, w, h)``, read back as ``(h, w)``)."""

import sys

import torch
from torch import nn

BUGS = ("in-frames-not-permuted", "out-permute-hw-swapped")
TWINS = ()
REPORTED = "reported-reshape"
DIMS = ("B=2 C=32 F=3 Hp=4 Wp=5 H=4",)
EQUAL = {DIMS[0]: "B=4 C=32 F=4 Hp=4 Wp=4 H=4"}


class Attention(nn.Module):
    def __init__(self, query_dim, heads, dim_head):
        super().__init__()
        self.heads, self.scale = heads, dim_head ** -0.5
        inner_dim = heads * dim_head
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_out = nn.Linear(inner_dim, query_dim)

    def head_to_batch_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        tensor = tensor.reshape(batch_size, seq_len, self.heads, dim // self.heads)    # (b, s, heads, d)
        return tensor.permute(0, 2, 1, 3).reshape(batch_size * self.heads, seq_len, dim // self.heads)

    def batch_to_head_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        tensor = tensor.reshape(batch_size // self.heads, self.heads, seq_len, dim)    # (b, heads, s, d)
        return tensor.permute(0, 2, 1, 3).reshape(batch_size // self.heads, seq_len, dim * self.heads)

    def forward(self, hidden_states):                                                  # (b, s, c)
        query = self.head_to_batch_dim(self.to_q(hidden_states))                       # (b*heads, s, d)
        key = self.head_to_batch_dim(self.to_k(hidden_states))
        value = self.head_to_batch_dim(self.to_v(hidden_states))
        empty = torch.empty(query.shape[0], query.shape[1], key.shape[1], dtype=query.dtype)
        scores = torch.baddbmm(empty, query, key.transpose(-1, -2), beta=0, alpha=self.scale)
        attention_probs = scores.softmax(dim=-1)                                      # (b*heads, s, s)
        hidden_states = self.batch_to_head_dim(torch.bmm(attention_probs, value))      # (b, s, c)
        return self.to_out(hidden_states)


class TransformerTemporalModel(nn.Module):
    def __init__(self, in_channels, num_attention_heads, bug=""):
        super().__init__()
        self.bug = bug
        inner_dim = in_channels
        self.norm = nn.GroupNorm(num_groups=32, num_channels=in_channels, eps=1e-6, affine=True)
        self.proj_in = nn.Linear(in_channels, inner_dim)
        self.norm1, self.norm3 = nn.LayerNorm(inner_dim), nn.LayerNorm(inner_dim)
        self.attn1 = Attention(inner_dim, num_attention_heads, inner_dim // num_attention_heads)
        self.ff = nn.Sequential(nn.Linear(inner_dim, 4 * inner_dim), nn.GELU(), nn.Linear(4 * inner_dim, inner_dim))
        self.proj_out = nn.Linear(inner_dim, in_channels)

    def forward(self, hidden_states, num_frames):                                      # (b*f, c, h, w)
        batch_frames, channel, height, width = hidden_states.shape
        batch_size = batch_frames // num_frames
        residual = hidden_states
        hidden_states = hidden_states[None, :].reshape(batch_size, num_frames, channel, height, width)
        hidden_states = self.norm(hidden_states.permute(0, 2, 1, 3, 4))               # (b, c, f, h, w)
        if self.bug == "in-frames-not-permuted":
            hidden_states = hidden_states.reshape(batch_size * height * width, num_frames, channel)
        else:
            hidden_states = hidden_states.permute(0, 3, 4, 2, 1).reshape(batch_size * height * width, num_frames,
                                                                         channel)     # (b*h*w, f, c)
        hidden_states = self.proj_in(hidden_states)
        hidden_states = hidden_states + self.attn1(self.norm1(hidden_states))
        hidden_states = hidden_states + self.ff(self.norm3(hidden_states))
        hidden_states = self.proj_out(hidden_states)                                   # (b*h*w, f, c)
        if self.bug == "reported-reshape":
            hidden_states = hidden_states[None, None, :].reshape(batch_size, height, width, channel, num_frames)
        else:
            hidden_states = hidden_states[None, None, :].reshape(batch_size, height, width, num_frames, channel)
        if self.bug == "out-permute-hw-swapped":
            hidden_states = hidden_states.permute(0, 3, 4, 2, 1).contiguous()
        else:
            hidden_states = hidden_states.permute(0, 3, 4, 1, 2).contiguous()         # (b, f, c, h, w)
        hidden_states = hidden_states.reshape(batch_frames, channel, height, width)    # (b*f, c, h, w)
        return hidden_states + residual


class UNet3DTemporalStage(nn.Module):
    def __init__(self, channels, heads, bug=""):
        super().__init__()
        self.temp_attentions = TransformerTemporalModel(channels, heads, bug)

    def forward(self, sample):                                                         # (B, C, F, H, W)
        batch, channel, num_frames, height, width = sample.shape
        sample = sample.permute(0, 2, 1, 3, 4).reshape(batch * num_frames, channel, height, width)
        sample = self.temp_attentions(sample, num_frames)                              # (B*F, C, H, W)
        return sample[None, :].reshape(batch, num_frames, channel, height, width).permute(0, 2, 1, 3, 4)


def build(bug="", B=2, C=32, F=3, Hp=4, Wp=5, H=4):  # noqa: N803
    torch.manual_seed(0)
    return UNet3DTemporalStage(C, H, bug).eval(), (torch.randn(B, C, F, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

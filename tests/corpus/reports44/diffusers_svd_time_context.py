"""huggingface/diffusers pull request #7268 ("Fix SVD bug (shape of ``time_context``)", merged): in
``TransformerSpatioTemporalModel.forward`` (``models/transformers/transformer_temporal.py``) the first frame's
conditioning was broadcast as ``time_context_first_timestep[None, :].broadcast_to(height * width, batch_size, ...)``
and reshaped to ``(h w b) n c``, while ``TemporalBasicTransformerBlock`` (``models/attention.py``) lays its tokens
out ``(b h w)`` (``reshape(batch_size, num_frames, seq_length, channels).permute(0, 2, 1, 3)``), so with
``batch_size > 1`` each temporal token cross-attended to another video's conditioning ("could cause data mismatch
during the cross-attention operation ... it should be ``(b h w) n c`` instead of ``(h w b) n c``"). The fix
broadcasts ``time_context_first_timestep[:, None]`` to ``(batch_size, height * width, ...)``.

The idiom (reduced: the latent already projected and flattened, ``(batch_frames, height*width, C)``; one spatial
``BasicTransformerBlock`` and one temporal block, blended as ``AlphaBlender``'s
``learned_with_images``: ``sigmoid(mix_factor)``, or 1 where ``image_only_indicator`` marks a still image):
``Attention`` with ``to_q``/``to_k``/``to_v`` (no bias), ``view(batch_size, -1, heads, head_dim).transpose(1, 2)``,
``F.scaled_dot_product_attention``, ``transpose(1, 2).reshape``, ``to_out``; the conditioning ``(batch_frames, S,
C)`` (SVD's image embedding, here S tokens), its first frame per video taken as ``time_context``.

Bugs: ``time-context-hw-major``: the ``(h w b)`` broadcast (PR #7268); ``frames-not-permuted``: the temporal block
reshapes ``(b, f, s, c)`` to ``(b*s, f, c)`` without ``permute(0, 2, 1, 3)`` (frames and positions folded)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("time-context-hw-major", "frames-not-permuted")
TWINS = ()
DIMS = ("B=2 F=3 P=5 S=7 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 F=4 P=4 S=4 D=32 H=4"}


class Attention(nn.Module):
    def __init__(self, query_dim, heads, dim_head):
        super().__init__()
        self.heads, inner_dim = heads, heads * dim_head
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_out = nn.Linear(inner_dim, query_dim)

    def forward(self, hidden_states, encoder_hidden_states=None):
        batch_size = hidden_states.shape[0]
        encoder_hidden_states = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        query = self.to_q(hidden_states)
        key, value = self.to_k(encoder_hidden_states), self.to_v(encoder_hidden_states)
        head_dim = key.shape[-1] // self.heads
        query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)           # (B, H, L, d)
        key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)               # (B, H, S, d)
        value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)           # (B, H, S, d)
        hidden_states = F.scaled_dot_product_attention(query, key, value)                  # (B, H, L, d)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)   # (B, L, D)
        return self.to_out(hidden_states)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn1, self.attn2 = Attention(dim, heads, dim // heads), Attention(dim, heads, dim // heads)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, hidden_states, encoder_hidden_states):
        hidden_states = self.attn1(self.norm1(hidden_states)) + hidden_states
        hidden_states = self.attn2(self.norm2(hidden_states), encoder_hidden_states) + hidden_states
        return self.ff(self.norm3(hidden_states)) + hidden_states


class TemporalBasicTransformerBlock(Block):
    def forward(self, hidden_states, num_frames, encoder_hidden_states, bug=""):
        batch_frames, seq_length, channels = hidden_states.shape
        batch_size = batch_frames // num_frames
        hidden_states = hidden_states[None, :].reshape(batch_size, num_frames, seq_length, channels)  # (b, f, s, c)
        if bug != "frames-not-permuted":
            hidden_states = hidden_states.permute(0, 2, 1, 3)                                  # (b, s, f, c)
        hidden_states = hidden_states.reshape(batch_size * seq_length, num_frames, channels)   # (b*s, f, c)
        hidden_states = super().forward(hidden_states, encoder_hidden_states)
        hidden_states = hidden_states[None, :].reshape(batch_size, seq_length, num_frames, channels)  # (b, s, f, c)
        hidden_states = hidden_states.permute(0, 2, 1, 3)                                      # (b, f, s, c)
        return hidden_states.reshape(batch_size * num_frames, seq_length, channels)            # (b*f, s, c)


class TransformerSpatioTemporalModel(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.block = Block(dim, heads)
        self.temporal_block = TemporalBasicTransformerBlock(dim, heads)
        self.mix_factor = nn.Parameter(torch.tensor([0.5]))
        self.proj_out = nn.Linear(dim, dim)

    def forward(self, hidden_states, encoder_hidden_states, image_only_indicator):
        batch_frames, hw, _ = hidden_states.shape                                              # (b*f, h*w, c)
        num_frames = image_only_indicator.shape[-1]
        batch_size = batch_frames // num_frames
        time_context = encoder_hidden_states                                                   # (b*f, S, c)
        time_context_first_timestep = time_context[None, :].reshape(
            batch_size, num_frames, -1, time_context.shape[-1])[:, 0]                          # (b, S, c)
        if self.bug == "time-context-hw-major":
            time_context = time_context_first_timestep[None, :].broadcast_to(
                hw, batch_size, time_context.shape[-2], time_context.shape[-1])                # (h*w, b, S, c)
            time_context = time_context.reshape(hw * batch_size, -1, time_context.shape[-1])   # ((h w b), S, c)
        else:
            time_context = time_context_first_timestep[:, None].broadcast_to(
                batch_size, hw, time_context.shape[-2], time_context.shape[-1])                # (b, h*w, S, c)
            time_context = time_context.reshape(batch_size * hw, -1, time_context.shape[-1])   # ((b h w), S, c)
        hidden_states = self.block(hidden_states, encoder_hidden_states)
        hidden_states_mix = self.temporal_block(hidden_states, num_frames, time_context, bug=self.bug)
        alpha = torch.where(image_only_indicator.bool(), torch.ones(1, 1), torch.sigmoid(self.mix_factor))  # (b, f)
        alpha = alpha.reshape(-1)[:, None, None]                                               # (b*f, 1, 1)
        hidden_states = alpha * hidden_states + (1.0 - alpha) * hidden_states_mix
        return self.proj_out(hidden_states)                                                    # (b*f, h*w, c)


def build(bug="", B=2, F=3, P=5, S=7, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    model = TransformerSpatioTemporalModel(D, H, bug=bug)
    return model.eval(), (torch.randn(B * F, P, D), torch.randn(B * F, S, D), torch.zeros(B, F))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

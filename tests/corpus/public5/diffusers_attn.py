"""huggingface/diffusers, models/attention_processor.py (``Attention`` with ``AttnProcessor``): a 4-d
latent map flattened to tokens (``view(B, C, H*W).transpose(1, 2)``), cross-attention to text states,
``head_to_batch_dim`` (``reshape(b, s, h, d // h).permute(0, 2, 1, 3).reshape(b * h, s, d // h)``),
``get_attention_scores`` (``baddbmm`` on an empty base with ``beta=0``, ``alpha=scale``) and
``batch_to_head_dim``; the output back to ``[B, C, H, W]`` with the residual.

Bugs (argument): ``no-permute``: ``head_to_batch_dim`` as ``reshape(b * h, s, d // h)`` without the
permute (the reshape-for-transpose slip that PyTorch's "use reshape" advice hides); ``heads-first``:
``batch_to_head_dim`` reads the folded axis as ``(h, b)`` (``reshape(h, b // h, ...)``), the opposite of
how ``head_to_batch_dim`` folded it (heads of one sample land in another: the order mismatch of
https://github.com/huggingface/diffusers/issues/1880's discussion of folded heads)."""

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, query_dim, cross_dim, heads, dim_head, bug=""):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.scale, self.bug = heads, dim_head ** -0.5, bug
        self.group_norm = nn.GroupNorm(num_groups=4, num_channels=query_dim, eps=1e-6, affine=True)
        self.to_q = nn.Linear(query_dim, inner, bias=False)
        self.to_k = nn.Linear(cross_dim, inner, bias=False)
        self.to_v = nn.Linear(cross_dim, inner, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(inner, query_dim), nn.Dropout(0.0)])

    def head_to_batch_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        head_size = self.heads
        if self.bug == "no-permute":
            return tensor.reshape(batch_size * head_size, seq_len, dim // head_size)  # bug: (B*H?, T?, d)
        tensor = tensor.reshape(batch_size, seq_len, head_size, dim // head_size)  # (B, T, H, d)
        tensor = tensor.permute(0, 2, 1, 3)  # (B, H, T, d)
        return tensor.reshape(batch_size * head_size, seq_len, dim // head_size)  # (B*H, T, d)

    def batch_to_head_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        head_size = self.heads
        if self.bug == "heads-first":
            tensor = tensor.reshape(head_size, batch_size // head_size, seq_len, dim)  # bug: (H?, B?, T, d)
            tensor = tensor.permute(1, 2, 0, 3)  # (B, T, H, d)
        else:
            tensor = tensor.reshape(batch_size // head_size, head_size, seq_len, dim)  # (B, H, T, d)
            tensor = tensor.permute(0, 2, 1, 3)  # (B, T, H, d)
        return tensor.reshape(batch_size // head_size, seq_len, dim * head_size)  # (B, T, D)

    def get_attention_scores(self, query, key):
        baddbmm_input = torch.empty(query.shape[0], query.shape[1], key.shape[1], dtype=query.dtype)
        scores = torch.baddbmm(baddbmm_input, query, key.transpose(-1, -2), beta=0, alpha=self.scale)
        return scores.softmax(dim=-1)  # (B*H, T, S)

    def forward(self, hidden_states, encoder_hidden_states):
        residual = hidden_states
        batch_size, channel, height, width = hidden_states.shape
        hidden_states = self.group_norm(hidden_states)
        hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)  # (B, T, C)
        query = self.head_to_batch_dim(self.to_q(hidden_states))  # (B*H, T, d)
        key = self.head_to_batch_dim(self.to_k(encoder_hidden_states))  # (B*H, S, d)
        value = self.head_to_batch_dim(self.to_v(encoder_hidden_states))  # (B*H, S, d)
        attention_probs = self.get_attention_scores(query, key)
        hidden_states = self.batch_to_head_dim(torch.bmm(attention_probs, value))  # (B, T, inner)
        hidden_states = self.to_out[1](self.to_out[0](hidden_states))  # (B, T, C)
        hidden_states = hidden_states.transpose(-1, -2).reshape(batch_size, channel, height, width)
        return hidden_states + residual  # (B, C, Hp, Wp)


def build(bug="", B=2, T=12, S=5, D=32, H=4, C=24):
    """--dims 'B=2 T=12 S=5 D=32 H=4 C:features=24': a [B, D, 3, 4] latent map (T = 12 places; Stable
    Diffusion's 320 channels = 8 heads of 40) attending to S text states of width C."""
    torch.manual_seed(0)
    model = Attention(D, C, H, D // H, bug).eval()
    return model, (torch.randn(B, D, 3, T // 3), torch.randn(B, S, C))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/diffusers, models/attention_processor.py (``JointAttnProcessor2_0``, Stable Diffusion 3's
MMDiT joint attention; https://github.com/huggingface/diffusers): the image stream and the text stream
each projected and split into heads (``view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)``),
joined along the tokens ``torch.cat([query, encoder_hidden_states_query_proj], dim=2)`` (and the same for
keys and values); ``F.scaled_dot_product_attention``; ``transpose(1, 2).reshape(batch_size, -1, attn.heads
* head_dim)``; split back ``hidden_states[:, : residual.shape[1]], hidden_states[:, residual.shape[1] :]``
and each stream through its own output projection.

Bugs (argument): ``split-text-first``: the joined output split as if the text came first (Flux's
``cat([txt, img])`` order, ``encoder_hidden_states, hidden_states = hidden_states[:, :txt_len],
hidden_states[:, txt_len:]``) on SD3's image-first join: the image stream gets the text tokens and the
first image tokens; ``values-text-first``: ``value = torch.cat([encoder_value, value], dim=2)`` while keys
are joined image-first: each key is paired with another token's value."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("split-text-first", "values-text-first")
TWINS = ()
DIMS = ("B=2 T=12 S=5 D=32 H=4",)


class JointAttention(nn.Module):
    def __init__(self, dim=32, heads=4, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.add_q_proj, self.add_k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.add_v_proj = nn.Linear(dim, dim)
        self.to_out = nn.Linear(dim, dim)
        self.to_add_out = nn.Linear(dim, dim)

    def forward(self, hidden_states, encoder_hidden_states):
        residual = hidden_states
        batch_size = encoder_hidden_states.shape[0]
        query = self.to_q(hidden_states)
        key = self.to_k(hidden_states)
        value = self.to_v(hidden_states)
        inner_dim = key.shape[-1]
        head_dim = inner_dim // self.heads
        query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)  # (B, H, T, d_k)
        key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)  # (B, H, T, d_k)
        value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)  # (B, H, T, d_k)
        enc_query = self.add_q_proj(encoder_hidden_states).view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        enc_key = self.add_k_proj(encoder_hidden_states).view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        enc_value = self.add_v_proj(encoder_hidden_states).view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        query = torch.cat([query, enc_query], dim=2)  # (B, H, T+S, d_k)
        key = torch.cat([key, enc_key], dim=2)  # (B, H, T+S, d_k)
        if self.bug == "values-text-first":
            value = torch.cat([enc_value, value], dim=2)  # bug: (B, H, S+T, d_k) against keys T+S
        else:
            value = torch.cat([value, enc_value], dim=2)  # (B, H, T+S, d_k)
        hidden_states = F.scaled_dot_product_attention(query, key, value, dropout_p=0.0, is_causal=False)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)  # (B, T+S, D)
        if self.bug == "split-text-first":
            txt_len = encoder_hidden_states.shape[1]
            encoder_hidden_states, hidden_states = (hidden_states[:, :txt_len], hidden_states[:, txt_len:])  # bug
        else:
            hidden_states, encoder_hidden_states = (
                hidden_states[:, : residual.shape[1]],
                hidden_states[:, residual.shape[1] :],
            )  # (B, T, D), (B, S, D)
        return self.to_out(hidden_states), self.to_add_out(encoder_hidden_states)


def build(bug="", B=2, T=12, S=5, D=32, H=4):  # noqa: N803
    """--dims 'B=2 T=12 S=5 D=32 H=4': image tokens (B, T, D) and text tokens (B, S, D)."""
    torch.manual_seed(0)
    return JointAttention(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""huggingface/transformers, src/transformers/models/idefics3/modeling_idefics3.py (``Idefics3Connector`` with
``pixel_shuffle`` and ``Idefics3SimpleMLP``; the same code is SmolVLM's ``SmolVLMConnector``; 2024-2025): the
vision encoder's ``[bsz, seq, embed_dim]`` patches, ``seq = side * side``, are shuffled into fewer, wider tokens:
``x.view(bsz, height, width, embed_dim)``, ``x.view(bsz, height, width / scale, embed_dim * scale)`` (each ``scale``
neighbours in a row side by side), ``permute(0, 2, 1, 3)``, ``reshape(bsz, width / scale, height / scale,
embed_dim * scale**2)`` (and ``scale`` neighbouring rows), ``permute(0, 2, 1, 3)``, ``reshape(bsz, seq / scale**2,
embed_dim * scale**2)``; ``modality_projection`` (a bias-free ``Linear``) to the text width; the image tokens then
take their places before the text (``inputs_merger``) and a Llama-style self-attention runs over both
(``view(bsz, q_len, heads, head_dim).transpose(1, 2)``, causal mask, softmax, ``transpose(1, 2).reshape``).

Bugs: ``shuffle-no-permute``: the first ``permute(0, 2, 1, 3)`` left out (the reshape then glues the halves of
two rows of the same column block, not a ``scale x scale`` square of neighbours: the run goes through, each token
holds patches from two places in the image); ``merge-heads-no-transpose``: the attention's output ``[bsz, heads,
q_len, head_dim]`` reshaped to ``[bsz, q_len, hidden]`` without ``transpose(1, 2)`` (heads and tokens mixed)."""

import math
import sys

import torch
from torch import nn

BUGS = ("shuffle-no-permute", "merge-heads-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 G=8 V=12",)
SCALE = 2


class Idefics3Connector(nn.Module):
    def __init__(self, vision_hidden, text_hidden, scale_factor=SCALE, bug=""):
        super().__init__()
        self.scale_factor, self.bug = scale_factor, bug
        self.modality_projection = nn.Linear(vision_hidden * scale_factor ** 2, text_hidden, bias=False)

    def pixel_shuffle(self, x, scale_factor=2):
        bsz, seq, embed_dim = x.size()
        height = width = int(seq ** 0.5)
        x = x.view(bsz, height, width, embed_dim)                                    # (b, h, w, e)
        x = x.view(bsz, height, int(width / scale_factor), embed_dim * scale_factor)  # (b, h, w/s, e·s)
        if self.bug != "shuffle-no-permute":
            x = x.permute(0, 2, 1, 3)                                                # (b, w/s, h, e·s)
        x = x.reshape(bsz, int(width / scale_factor), int(height / scale_factor),
                      embed_dim * (scale_factor ** 2))                               # (b, w/s, h/s, e·s²)
        x = x.permute(0, 2, 1, 3)                                                    # (b, h/s, w/s, e·s²)
        x = x.reshape(bsz, int(seq / (scale_factor ** 2)), embed_dim * (scale_factor ** 2))   # (b, n, e·s²)
        return x

    def forward(self, image_hidden_states):
        image_hidden_states = self.pixel_shuffle(image_hidden_states, self.scale_factor)
        return self.modality_projection(image_hidden_states)                         # (b, n, D)


class LlamaStyleAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, hidden_size // num_heads, bug
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)   # (b, h, L, d)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)      # (b, h, L, L)
        causal = torch.full((q_len, q_len), torch.finfo(scores.dtype).min).triu(1)  # (L, L)
        probs = nn.functional.softmax(scores + causal, dim=-1)
        out = torch.matmul(probs, v)                                                 # (b, h, L, d)
        if self.bug != "merge-heads-no-transpose":
            out = out.transpose(1, 2).contiguous()                                   # (b, L, h, d)
        out = out.reshape(bsz, q_len, -1)                                            # (b, L, D)
        return self.o_proj(out)


class Idefics3Sketch(nn.Module):
    def __init__(self, vision_hidden, text_hidden, num_heads, bug=""):
        super().__init__()
        self.connector = Idefics3Connector(vision_hidden, text_hidden, bug=bug)
        self.self_attn = LlamaStyleAttention(text_hidden, num_heads, bug)

    def forward(self, image_hidden_states, inputs_embeds):
        image_tokens = self.connector(image_hidden_states)                          # (b, n, D)
        merged = torch.cat([image_tokens, inputs_embeds], dim=1)                     # (b, n + T, D)
        return self.self_attn(merged)


def build(bug="", B=2, T=6, D=32, H=4, G=8, V=12):
    torch.manual_seed(0)
    inputs = (torch.randn(B, G * G, V), torch.randn(B, T, D))                        # patches of a G x G grid, text
    return Idefics3Sketch(V, D, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

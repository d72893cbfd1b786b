"""openai/CLIP, ``clip/model.py`` (2021, ``AttentionPool2d``, the pooling head of the ``ModifiedResNet``
encoders): the feature map flattened to positions first, ``x.flatten(start_dim=2).permute(2, 0, 1)`` (NCHW ->
(HW)NC); the mean of the positions prepended as the query token, ``torch.cat([x.mean(dim=0, keepdim=True), x],
dim=0)``; a learned ``positional_embedding[:, None, :]`` of ``HW + 1`` rows; ``F.multi_head_attention_forward``
with the mean token alone as the query (``query=x[:1]``, ``key=x``, ``value=x``) and separate q/k/v
projections; ``x.squeeze(0)``.

Bugs: ``flatten-without-permute``: the map read position-first by a view, ``x.reshape(H * W, N, C)`` (the
``permute(2, 0, 1)`` dropped: channels and positions interleave, the slip of ports that "simplify" the
flatten); ``batch-first-port``: the pool ported to a batch-first layout
(``x.flatten(2).transpose(1, 2)``, the mean over ``dim=1``, ``positional_embedding[None]``) while the call keeps
the sequence-first ``F.multi_head_attention_forward`` and ``query=x[:1]`` (the ``batch_first`` mismatch of
``nn.MultiheadAttention`` reports: the images of the batch attend to each other, position by position)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class AttentionPool2d(nn.Module):
    def __init__(self, spacial_dim, embed_dim, num_heads, output_dim=None, bug=""):
        super().__init__()
        self.bug = bug
        self.positional_embedding = nn.Parameter(torch.randn(spacial_dim[0] * spacial_dim[1] + 1, embed_dim)
                                                 / embed_dim ** 0.5)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.c_proj = nn.Linear(embed_dim, output_dim or embed_dim)
        self.num_heads = num_heads

    def forward(self, x):
        N, C, H, W = x.shape
        if self.bug == "batch-first-port":
            x = x.flatten(start_dim=2).transpose(1, 2)                        # N(HW)C
            x = torch.cat([x.mean(dim=1, keepdim=True), x], dim=1)           # N(HW+1)C
            x = x + self.positional_embedding[None, :, :].to(x.dtype)
        else:
            if self.bug == "flatten-without-permute":
                x = x.reshape(H * W, N, C)                                   # NCHW -> (HW)NC, interleaved
            else:
                x = x.flatten(start_dim=2).permute(2, 0, 1)                   # NCHW -> (HW)NC
            x = torch.cat([x.mean(dim=0, keepdim=True), x], dim=0)           # (HW+1)NC
            x = x + self.positional_embedding[:, None, :].to(x.dtype)       # (HW+1)NC
        x, _ = F.multi_head_attention_forward(
            query=x[:1], key=x, value=x,
            embed_dim_to_check=x.shape[-1],
            num_heads=self.num_heads,
            q_proj_weight=self.q_proj.weight,
            k_proj_weight=self.k_proj.weight,
            v_proj_weight=self.v_proj.weight,
            in_proj_weight=None,
            in_proj_bias=torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]),
            bias_k=None,
            bias_v=None,
            add_zero_attn=False,
            dropout_p=0,
            out_proj_weight=self.c_proj.weight,
            out_proj_bias=self.c_proj.bias,
            use_separate_proj_weight=True,
            training=self.training,
            need_weights=False,
        )
        return x.squeeze(0)


BUGS = ("flatten-without-permute", "batch-first-port")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    return AttentionPool2d((Hp, Wp), D, H, bug=bug).eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""microsoft/VideoX, X-CLIP/models/cct.py (``CrossFramelAttentionBlock``): X-CLIP's cross-frame communication block,
a CLIP ViT block made video-aware. Tokens are sequence-first ``x [l, b·T, d]`` (``l`` = class token + patches, the
clip's ``T`` frames folded batch-major into CLIP's batch); ``x.view(l, b, T, d)``; one message token per frame from
the class token, ``message_fc(x[0, :, :, :])``, ``view(b, T, 1, d).permute(1, 2, 0, 3).view(T, b, d)`` (frames as the
sequence of a sequence-first ``nn.MultiheadAttention``: the messages of one video attend to each other), the residual,
``view(T, 1, b, d).permute(1, 2, 0, 3)`` back to ``[1, b, T, d]``, ``torch.cat([x, msg_token], dim=0)`` (each frame
gets its message as an extra token), ``view(l + 1, -1, d)``, CLIP's ``attn(x, x, x, need_weights=False,
attn_mask=None)`` over the ``l + 1`` tokens of each frame, the message dropped again (``x[:l]``), the MLP.

Bugs: ``message-attn-batch-first``: the messages handed over as ``msg_token.view(b, T, d)`` (batch-first, as the
rest of a modern codebase) to the sequence-first ``message_attn``: the messages attend across the videos of the batch
at each frame index, not across the frames of one video (and back ``view(b, T, 1, d).permute(2, 0, 1, 3)``);
``message-view-no-permute``: the way back ``msg_token.reshape(1, b, T, d)`` from ``[T, b, d]`` without the permute
(``view`` refuses the strides, so ``reshape``): the messages reach the wrong frames (frame-major order read as
video-major)."""

import sys

import torch
from torch import nn


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class CrossFramelAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head, T, bug=""):
        super().__init__()
        self.T, self.bug = T, bug
        self.message_fc = nn.Linear(d_model, d_model)
        self.message_ln = nn.LayerNorm(d_model)
        self.message_attn = nn.MultiheadAttention(d_model, n_head)
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_model * 4), QuickGELU(), nn.Linear(d_model * 4, d_model))
        self.attn_mask = None

    def attention(self, x):
        return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

    def forward(self, x):
        l, bt, d = x.size()  # noqa: E741
        b = bt // self.T
        x = x.view(l, b, self.T, d)                                                   # (l, b, T, d)
        msg_token = self.message_fc(x[0, :, :, :])                                    # (b, T, d)
        if self.bug == "message-attn-batch-first":
            msg_token = msg_token.view(b, self.T, d)                                  # (b, T, d) read as (L, N, E)
        else:
            msg_token = msg_token.view(b, self.T, 1, d)                               # (b, T, 1, d)
            msg_token = msg_token.permute(1, 2, 0, 3).view(self.T, b, d)              # (T, b, d)
        m = self.message_ln(msg_token)
        msg_token = msg_token + self.message_attn(m, m, m, need_weights=False)[0]
        if self.bug == "message-attn-batch-first":
            msg_token = msg_token.view(b, self.T, 1, d).permute(2, 0, 1, 3)           # (1, b, T, d)
        elif self.bug == "message-view-no-permute":
            msg_token = msg_token.reshape(1, b, self.T, d)
        else:
            msg_token = msg_token.view(self.T, 1, b, d).permute(1, 2, 0, 3)           # (1, b, T, d)
        x = torch.cat([x, msg_token], dim=0)                                          # (l+1, b, T, d)
        x = x.view(l + 1, -1, d)                                                      # (l+1, b·T, d)
        x = x + self.attention(self.ln_1(x))
        x = x[:l, :, :]                                                               # (l, b·T, d)
        return x + self.mlp(self.ln_2(x))


BUGS = ("message-attn-batch-first", "message-view-no-permute")
TWINS = ()
DIMS = ("B=2 F=3 T=5 D=32 H=4",)   # (B clips of F frames; T: a frame's tokens, class token included)
EQUAL = {DIMS[0]: "B=4 F=4 T=4 D=32 H=4"}


def build(bug="", B=2, F=3, T=5, D=32, H=4, V=None):  # noqa: N803
    """``B`` clips of ``F`` frames, each frame ``T`` CLIP tokens (class token first) at width ``D``, as CLIP's ViT
    holds them: sequence-first, the frames folded batch-major into its batch, ``[T, B·F, D]``. Where the sizes name
    the clips ``V``, ``B`` is CLIP's own batch, the ``V·F`` frames (``B = V·F``)."""
    torch.manual_seed(0)
    frames = B * F if V is None else V * F
    return CrossFramelAttentionBlock(D, H, F, bug).eval(), (torch.randn(T, frames, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

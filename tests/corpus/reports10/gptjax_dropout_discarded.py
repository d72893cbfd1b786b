"""jenkspt/gpt-jax issue #1 ("Attention dropout"; the author: "you're correct -- good catch! Missed this in my
tests since dropout is turned off"): the attention module computed ``x = Dropout(attn)`` and on the next line
``x = einsum(attn, v)``, the weights before the dropout, so the dropout's output was thrown away and attention
dropout never applied. Written here in PyTorch in the minGPT idiom gpt-jax follows.

The idiom: minGPT's ``CausalSelfAttention`` (fused ``c_attn``, ``split(D, dim=2)``, ``view(B, T, H, d)
.transpose(1, 2)``, ``masked_fill`` of a ``tril`` buffer, ``softmax(-1)``, ``attn_dropout``, ``(B, H, T, d)
.transpose(1, 2).contiguous().view(B, T, D)``, ``c_proj``).

Twin (argument): ``dropout-discarded``: ``y = att @ v`` with the weights before ``attn_dropout``; in eval,
where dropout is the identity, the two are one function and torch records the same values (a twin)."""

import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("dropout-discarded",)
DIMS = ("B=2 T=6 D=32 H=4",)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, block_size, bug=""):
        super().__init__()
        self.n_head, self.n_embd, self.bug = heads, dim, bug
        self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.attn_dropout, self.resid_dropout = nn.Dropout(0.1), nn.Dropout(0.1)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size,
                                                                                          block_size))

    def forward(self, x):                                                              # (B, T, D)
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)                # (B, H, T, d)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / k.size(-1) ** 0.5)                    # (B, H, T, T)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = att.softmax(dim=-1)
        dropped = self.attn_dropout(att)
        y = (att if self.bug == "dropout-discarded" else dropped) @ v                   # (B, H, T, d)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return CausalSelfAttention(D, H, block_size=16, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""pbloem/former issue #10 ("Issue with masking"; pbloem: "You're absolutely right ... the offset should be 1 if
you want to include the diagonal", fixed in the post): the causal mask of the blog post's self-attention was
``torch.triu_indices(t, t, offset=0)``, which writes ``-inf`` on the diagonal too: no token may attend to itself,
and the first token's row is all ``-inf`` (a row of NaNs after the softmax, pytorch/pytorch issue #24816). The
library's ``mask_(dot, maskval=float('-inf'), mask_diagonal=False)`` uses ``offset=1``.

The idiom (former's ``SelfAttention`` and ``util.mask_``, in a one-block ``GTransformer``, ported as is): token
and position embeddings (``pos_embedding(torch.arange(t))[None, :, :].expand(b, t, e)``), ``tokeys``,
``toqueries`` and ``tovalues`` (``Linear(emb, emb, bias=False)``), ``view(b, t, h, s)``, the heads folded into
the batch with ``transpose(1, 2).contiguous().view(b * h, t, s)``, queries and keys each divided by ``e ** (1/4)``,
``dot = torch.bmm(queries, keys.transpose(1, 2))``, the mask written in place at the ``triu_indices``,
``F.softmax(dot, dim=2)``, ``torch.bmm(dot, values).view(b, h, t, s)``, ``transpose(1, 2).contiguous().view(b, t,
s * h)``, ``unifyheads``; the block's post-norm residuals and feed-forward, ``toprobs`` and ``log_softmax``.

Bug (argument): ``mask-diagonal``: the causal mask's indices ``triu_indices(t, t, offset=0)`` (the diagonal
masked)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("mask-diagonal",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def mask_(matrices, maskval=0.0, mask_diagonal=True):
    """Masks out all values in the given batch of matrices where i <= j holds (i < j if mask_diagonal is false)."""
    h, w = matrices.size(-2), matrices.size(-1)
    indices = torch.triu_indices(h, w, offset=0 if mask_diagonal else 1)
    matrices[..., indices[0], indices[1]] = maskval


class SelfAttention(nn.Module):
    def __init__(self, emb, heads=8, mask=False, bug=""):
        super().__init__()
        self.emb, self.heads, self.mask, self.bug = emb, heads, mask, bug
        self.tokeys = nn.Linear(emb, emb, bias=False)
        self.toqueries = nn.Linear(emb, emb, bias=False)
        self.tovalues = nn.Linear(emb, emb, bias=False)
        self.unifyheads = nn.Linear(emb, emb)

    def forward(self, x):
        b, t, e = x.size()
        h = self.heads
        s = e // h
        keys = self.tokeys(x).view(b, t, h, s)                                           # (B, T, H, d)
        queries = self.toqueries(x).view(b, t, h, s)                                     # (B, T, H, d)
        values = self.tovalues(x).view(b, t, h, s)                                       # (B, T, H, d)
        keys = keys.transpose(1, 2).contiguous().view(b * h, t, s)                       # (B*H, T, d)
        queries = queries.transpose(1, 2).contiguous().view(b * h, t, s)                 # (B*H, T, d)
        values = values.transpose(1, 2).contiguous().view(b * h, t, s)                   # (B*H, T, d)
        queries = queries / (e ** (1 / 4))
        keys = keys / (e ** (1 / 4))
        dot = torch.bmm(queries, keys.transpose(1, 2))                                   # (B*H, T, T)
        if self.mask:
            mask_(dot, maskval=float("-inf"), mask_diagonal=self.bug == "mask-diagonal")
        dot = F.softmax(dot, dim=2)
        out = torch.bmm(dot, values).view(b, h, t, s)                                    # (B, H, T, d)
        out = out.transpose(1, 2).contiguous().view(b, t, s * h)                         # (B, T, D)
        return self.unifyheads(out)


class TransformerBlock(nn.Module):
    def __init__(self, emb, heads, mask, ff_hidden_mult=4, bug=""):
        super().__init__()
        self.attention = SelfAttention(emb, heads=heads, mask=mask, bug=bug)
        self.norm1, self.norm2 = nn.LayerNorm(emb), nn.LayerNorm(emb)
        self.ff = nn.Sequential(nn.Linear(emb, ff_hidden_mult * emb), nn.ReLU(), nn.Linear(ff_hidden_mult * emb, emb))

    def forward(self, x):
        x = self.norm1(self.attention(x) + x)
        return self.norm2(self.ff(x) + x)


class GTransformer(nn.Module):
    def __init__(self, emb, heads, seq_length, num_tokens, bug=""):
        super().__init__()
        self.token_embedding = nn.Embedding(num_tokens, emb)
        self.pos_embedding = nn.Embedding(seq_length, emb)
        self.tblocks = nn.Sequential(TransformerBlock(emb, heads, mask=True, bug=bug))
        self.toprobs = nn.Linear(emb, num_tokens)

    def forward(self, x):
        tokens = self.token_embedding(x)                                                 # (B, T, D)
        b, t, e = tokens.size()
        positions = self.pos_embedding(torch.arange(t))[None, :, :].expand(b, t, e)     # (B, T, D)
        x = self.tblocks(tokens + positions)
        return F.log_softmax(self.toprobs(x), dim=2)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = GTransformer(D, H, seq_length=16, num_tokens=50, bug=bug)
    return model.eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

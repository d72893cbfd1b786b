"""theislab/CellFlow issue #226 ("Mask in TokenAttentionPooling"): ``TokenAttentionPooling`` prepends a learned
class token to the set, builds the self-attention mask as ``token_mask = ones(B, 1, N+1, N+1)`` with only the
set's block ``token_mask[:, :, 1:, 1:] = mask`` written, runs one attention and returns the class token's
output: the class token's row stayed all ones, so it attended the padded set elements too and, as the issue
found, the set mask had no effect on the result ("I used some different masks and the result of this class is
identical"). The fix writes the class token's row and column from the set's valid elements
(``cls_token_to_data``).

The idiom (CellFlow's Flax module, written here in torch): ``nn.Embed(1, D)`` for the class token,
``concatenate((class_token, x), axis=-2)``, the 4-D pairwise set mask ``(B, 1, N, N)`` given by the caller,
Flax's ``MultiHeadDotProductAttention`` (``DenseGeneral`` projections to ``(B, L, H, d)``, ``einsum
'...qhd,...khd->...hqk'`` over ``sqrt(d)``, ``where(mask, w, finfo.min)``, ``softmax``, ``einsum
'...hqk,...khd->...qhd'``, the output ``DenseGeneral`` over the heads), ``z[:, 0, :]``. The second set is padded
by two. (The merged fix reads the valid elements from the batch's first mask, ``mask[0, 0]``; each row's own
is read here.)

Bug (argument): ``cls-row-unmasked``: the class token's row and column of the mask left all ones."""

import sys

import torch
from torch import nn

BUGS = ("cls-row-unmasked",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadDotProductAttention(nn.Module):
    def __init__(self, features, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, features // num_heads
        self.query, self.key, self.value = (nn.Linear(features, features) for _ in range(3))
        self.out = nn.Linear(features, features)

    def forward(self, inputs_q, mask):
        b, length, _ = inputs_q.shape
        shape = (b, length, self.num_heads, self.head_dim)
        query = self.query(inputs_q).view(shape)                                          # (B, L, H, d)
        key, value = self.key(inputs_q).view(shape), self.value(inputs_q).view(shape)
        query = query / self.head_dim ** 0.5
        attn_weights = torch.einsum("...qhd,...khd->...hqk", query, key)                  # (B, H, L, L)
        attn_weights = torch.where(mask, attn_weights, torch.finfo(attn_weights.dtype).min)
        attn_weights = torch.softmax(attn_weights, dim=-1)
        x = torch.einsum("...hqk,...khd->...qhd", attn_weights, value)                     # (B, L, H, d)
        return self.out(x.reshape(b, length, -1))


class TokenAttentionPooling(nn.Module):
    def __init__(self, features, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.class_token = nn.Embedding(1, features)
        self.attention = MultiHeadDotProductAttention(features, num_heads)

    def forward(self, x, mask):                                                            # (B, N, D), (B, 1, N, N)
        token_shape = (len(x), 1)
        class_token = self.class_token(torch.zeros(token_shape, dtype=torch.long))
        z = torch.cat((class_token, x), dim=-2)                                            # (B, 1+N, D)
        token_mask = torch.ones(x.shape[0], 1, x.shape[1] + 1, x.shape[1] + 1, dtype=torch.bool)
        token_mask[:, :, 1:, 1:] = mask                                                    # [mask]
        if self.bug != "cls-row-unmasked":
            cls_token_to_data = mask[:, 0, :, :].sum(dim=-2) > 0                           # (B, N)
            token_mask[:, 0, 0, 1:] = cls_token_to_data                                    # [mask]
            token_mask[:, 0, 1:, 0] = cls_token_to_data                                    # [mask]
        z = self.attention(z, token_mask)
        return z[:, 0, :]


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    valid = torch.ones(B, T, dtype=torch.bool)
    valid[1, -2:] = False                                                  # the second set padded by two
    mask = valid[:, None, :, None] & valid[:, None, None, :]
    return TokenAttentionPooling(D, H, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""xieenze/Trans2Seg issue #4 ("Reshape mis-alignment", open; the author: "I don't think this code has any problem,
at least it train and test well"): ``segmentron/modules/transformer.py``, ``Attention_Decoder.forward`` (the
decoder's cross-attention from the learned class queries to the encoder's feature tokens) merges its heads with
``x = (attn3 @ v).reshape(B, n_class, C)`` straight from ``[B, num_heads, n_class, C // num_heads]``. The reporter:
"swap dim 1 (num_heads) and dim 2 (num_class) before reshaping", permute to ``[B, n_class, heads, C / heads]``
first. The same function also splits the queries without a permute, ``fc_q(q).reshape(B, num_heads, n_class, C //
num_heads)`` from ``[B, n_class, C]``, while its keys and values are split the standard way (``reshape(B, N, 2,
heads, C // heads).permute(2, 0, 3, 1, 4)``). The two unpermuted reshapes undo each other on the returned
queries, but not on the attention maps the block also returns (``attn1.permute(0, 2, 1, 3)``, one map per class
and head for the segmentation head): the map filed under class i, head h is the score row of the query slot
``h * n_class + i`` of the scrambled split, a piece of another class's query (and the query's piece p meets head
h's keys, h != p).

Here ``bug=""`` is the standard layout the reporter asks for (queries split ``reshape(B, n_class, heads,
d).permute(0, 2, 1, 3)``, heads merged ``transpose(1, 2).reshape(B, n_class, C)``). The idiom: ``fc_q`` and the
fused ``fc_kv`` without bias, ``scale = head_dim ** -0.5``, ``softmax(dim=-1)``, ``proj``; ``Block_Decoder``'s
pre-norms (``norm1_clsembed`` on the queries, ``norm1`` on the features) and its residual MLP on the queries;
the class embedding ``cls_embed [1, n_class, C]`` expanded over the batch. T = n_class queries, S = h * w feature
tokens. Left out: the block's refinement of the maps, ``norm4 = LayerNorm(feat_HxW)`` and ``mlp3`` over the h * w
feature tokens of each map (by design: the maps are the segmentation's output; with them the correct file gets
``✗ norm-over-tokens``, recorded in the round test).

Bugs (heads): ``merge-without-transpose`` (the reported line alone, the split fixed); ``as-released`` (the
repository's code: split and merge both without a permute)."""

import sys

import torch
from torch import nn

BUGS = ("merge-without-transpose", "as-released")
TWINS = ()
DIMS = ("B=2 T=3 S=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 S=6 D=32 H=4"}


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(in_features, hidden_features), nn.GELU(), nn.Linear(hidden_features,
                                                                                                    in_features)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Attention_Decoder(nn.Module):  # noqa: N801
    def __init__(self, dim, num_heads=1, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.scale = (dim // num_heads) ** -0.5
        self.fc_q = nn.Linear(dim, dim * 1, bias=False)
        self.fc_kv = nn.Linear(dim, dim * 2, bias=False)
        self.proj = nn.Linear(dim, dim)

    def forward(self, q, x):                                                             # q: [B, T, C] x: [B, S, C]
        B, N, C = x.shape
        n_class = q.shape[1]
        if self.bug == "as-released":
            q = self.fc_q(q).reshape(B, self.num_heads, n_class, C // self.num_heads)
        else:
            q = self.fc_q(q).reshape(B, n_class, self.num_heads, C // self.num_heads)  # [B, T, H, d]
            q = q.permute(0, 2, 1, 3)                                                    # [B, H, T, d]
        kv = self.fc_kv(x).reshape(B, N, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]                                                              # [B, H, S, d]
        attn1 = (q @ k.transpose(-2, -1)) * self.scale                                   # [B, H, T, S]
        attn2 = attn1.softmax(dim=-1)
        if self.bug in ("merge-without-transpose", "as-released"):
            x = (attn2 @ v).reshape(B, n_class, C)
        else:
            x = (attn2 @ v).transpose(1, 2).reshape(B, n_class, C)                       # [B, T, C]
        x = self.proj(x)
        attn = attn1.permute(0, 2, 1, 3)                                                 # [B, T, H, S]
        return attn, x


class Block_Decoder(nn.Module):  # noqa: N801
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.norm1, self.norm1_clsembed, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention_Decoder(dim, num_heads=num_heads, bug=bug)
        self.mlp = Mlp(dim, 4 * dim)

    def forward(self, query, feat):
        attn, query = self.attn(self.norm1_clsembed(query), self.norm1(feat))
        query = query + self.mlp(self.norm2(query))
        return attn, query


class TransDecoder(nn.Module):
    def __init__(self, embed_dim, num_heads, nclass, bug=""):
        super().__init__()
        self.cls_embed = nn.Parameter(torch.randn(1, nclass, embed_dim) * 0.02)
        self.blocks_decoder = nn.ModuleList([Block_Decoder(embed_dim, num_heads, bug)])

    def forward(self, feat):                                                             # [B, S, C]
        B = feat.shape[0]
        query = self.cls_embed.expand(B, -1, -1)                                         # [B, T, C]
        attns_list = []
        for blk in self.blocks_decoder:
            attn, query = blk(query, feat)
            attns_list.append(attn)
        return attns_list[-1], query                                                     # [B, T, H, S], [B, T, C]


def build(bug="", B=2, T=3, S=6, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    return TransDecoder(D, H, T, bug).eval(), (torch.randn(B, S, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

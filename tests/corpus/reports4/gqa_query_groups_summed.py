"""fkodom/grouped-query-attention-pytorch issue #5 ("Query / key mixing correct?"; fkodom: "There was a bug
in my ``scaled_dot_product_gqa`` code, which sadly wasn't caught by the unit tests. I just pushed a fix"):
the grouped-query scores were computed ``einsum(query, key, "b g h n d, b h s d -> b h n s")``: the group
axis ``g`` does not appear in the output, so the einsum summed the ``g`` query heads that share a key head
into one score, "reduces the queries to the number of keys and values" (the reporter), and the layer
returned ``H_kv`` heads, not ``H``. The fix keeps the group, ``-> b g h n s``, weighs the values per query
head and merges ``b g h n d -> b n (h g) d``, as Llama 2 does by repeating the key heads.

The repository's idiom, in torch without einops: inputs ``(b, n, h, d)``, moved to ``(b, h, n, d)``, the
queries scaled by ``sqrt(d)``, viewed ``(b, h_kv, g, n, d)`` (``"b (h g) n d"``) and moved to
``(b, g, h_kv, n, d)``, ``softmax(dim=-1)``, the value product, the merge; ``MultiheadGQA``'s
``q_proj``/``k_proj``/``v_proj`` (the key and value ones ``kv_embed_dim`` wide) and ``out_proj`` (as wide as
what the attention returns: before the fix, ``kv_embed_dim``).

Bug (argument): ``groups-summed``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("groups-summed",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def scaled_dot_product_gqa(query, key, value, bug=""):
    query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)   # (b, h, n, d)
    bq, hq, nq, dq = query.shape
    hk = key.shape[1]
    num_head_groups = hq // hk
    query = query / math.sqrt(dq)
    query = query.view(bq, hk, num_head_groups, nq, dq).transpose(1, 2)        # (b, g, h, n, d)
    if bug == "groups-summed":
        similarity = torch.einsum("bghnd,bhsd->bhns", query, key)               # [scores]
        attention = F.softmax(similarity, dim=-1)
        out = torch.einsum("bhns,bhsd->bhnd", attention, value)                 # (b, h_kv, n, d)
        return out.transpose(1, 2)                                              # (b, n, h_kv, d)
    similarity = torch.einsum("bghnd,bhsd->bghns", query, key)                  # [scores]
    attention = F.softmax(similarity, dim=-1)
    out = torch.einsum("bghns,bhsd->bghnd", attention, value)                   # (b, g, h, n, d)
    return out.permute(0, 3, 2, 1, 4).reshape(bq, nq, hq, dq)                   # (b, n, (h g), d)


class MultiheadGQA(nn.Module):
    def __init__(self, embed_dim, query_heads, kv_heads, bug=""):
        super().__init__()
        self.query_heads, self.kv_heads, self.bug = query_heads, kv_heads, bug
        head_dim = embed_dim // query_heads
        kv_embed_dim = head_dim * kv_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, kv_embed_dim)
        self.v_proj = nn.Linear(embed_dim, kv_embed_dim)
        self.out_proj = nn.Linear(kv_embed_dim if bug == "groups-summed" else embed_dim, embed_dim)

    def forward(self, query, key, value):
        q = self.q_proj(query).unflatten(-1, (self.query_heads, -1))            # (b, n, h, d)
        k = self.k_proj(key).unflatten(-1, (self.kv_heads, -1))
        v = self.v_proj(value).unflatten(-1, (self.kv_heads, -1))
        x = scaled_dot_product_gqa(q, k, v, self.bug)
        return self.out_proj(x.flatten(2))                                      # (b, n, embed_dim)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    return MultiheadGQA(D, H, H // 2, bug).eval(), (x, x, x)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

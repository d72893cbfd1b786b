"""lucidrains/routing-transformer, routing_transformer/routing_transformer.py (v1.6, ``KmeansAttention``,
``Kmeans``, ``batched_index_select``, ``scatter_mean``, ``similarity``): content-based sparse attention. Queries
and keys are l2-normalised and compared with ``C`` learned centroids (``einsum('bhld,hcd->bhlc')``); each cluster
takes its ``W = T // C`` nearest tokens (``dists.topk(W, dim=-2)`` after a transpose to ``(B, H, C, T)``);
queries, keys and values are gathered into the clusters by ``batched_index_select`` (``gather`` along the token axis
with the indices expanded over the features), attention runs inside each cluster (``einsum('bhnid,bhnjd->bhnij')``,
``softmax(dim=-1)``, ``einsum('bhnij,bhnjd->bhnid')``), and the outputs are scattered back to their tokens
(``scatter_mean``: ``scatter_add`` by the same indices, divided by the counts).

Bugs (natural slips): ``restore-forgotten``: the clustered output reshaped straight to ``(B, H, T, d)`` (the scatter
back to token order left out: every token receives another token's output, since ``C·W == T``: the forgotten
argsort restore); ``softmax-over-queries``: ``softmax(dim=-2)`` over the cluster's queries."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def batched_index_select(values, indices):
    last_dim = values.shape[-1]
    return values.gather(2, indices[..., None].expand(-1, -1, -1, last_dim))


def scatter_mean(src, t, index, dim, eps=1e-5):
    numer = src.scatter_add(dim, index, t)
    denom = src.scatter_add(dim, index, torch.ones_like(t))
    return numer / (denom + eps)


class Kmeans(nn.Module):
    def __init__(self, num_heads, head_dim, num_clusters):
        super().__init__()
        self.register_buffer("means", F.normalize(torch.randn(num_heads, num_clusters, head_dim), dim=-1))

    def forward(self, x):
        x = F.normalize(x, dim=-1)
        return torch.einsum("bhld,hcd->bhlc", x, self.means)                 # (B, H, T, C)


class KmeansAttention(nn.Module):
    def __init__(self, num_clusters, window_size, num_heads, head_dim, bug=""):
        super().__init__()
        self.num_clusters, self.window_size, self.bug = num_clusters, window_size, bug
        self.kmeans = Kmeans(num_heads, head_dim, num_clusters)

    def forward(self, q, k, v):
        b, h, t, d = q.shape
        wsz = self.window_size
        dists = self.kmeans(q)
        indices = dists.transpose(2, 3).topk(wsz, dim=-1).indices            # (B, H, C, W)
        indices = indices.reshape(b, h, -1)                                  # (B, H, C*W)
        nc = self.num_clusters
        qc = batched_index_select(q, indices).reshape(b, h, nc, wsz, d)
        kc = batched_index_select(k, indices).reshape(b, h, nc, wsz, d)
        vc = batched_index_select(v, indices).reshape(b, h, nc, wsz, d)
        dots = torch.einsum("bhnid,bhnjd->bhnij", qc, kc) * (d ** -0.5)      # (B, H, C, W, W)
        dots = dots.softmax(dim=-2 if self.bug == "softmax-over-queries" else -1)
        bo = torch.einsum("bhnij,bhnjd->bhnid", dots, vc)                    # (B, H, C, W, d)
        so = bo.reshape(b, h, -1, d)                                         # (B, H, C*W, d)
        if self.bug == "restore-forgotten":
            return so
        out = scatter_mean(torch.zeros_like(q), so, indices[..., None].expand(-1, -1, -1, d), -2)
        return out                                                           # (B, H, T, d)


class SelfAttention(nn.Module):
    def __init__(self, dim, heads, num_clusters, window_size, bug=""):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.global_attn = KmeansAttention(num_clusters, window_size, heads, dim // heads, bug)

    def forward(self, x):
        b, t, e = x.shape
        h = self.heads
        q, v = self.to_q(x), self.to_v(x)
        q, v = (z.reshape(b, t, h, -1).transpose(1, 2) for z in (q, v))     # (B, H, T, d)
        k = F.normalize(q, dim=-1)                                           # shared query-key
        out = self.global_attn(q, k, v)
        out = out.transpose(1, 2).reshape(b, t, -1)                          # (B, T, D)
        return self.to_out(out)


BUGS = ("restore-forgotten", "softmax-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    num_clusters = 2
    model = SelfAttention(D, H, num_clusters, T // num_clusters, bug).eval()
    return model, (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

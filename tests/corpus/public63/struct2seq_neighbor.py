"""jingraham/neurips19-graph-protein-design, struct2seq/self_attention.py (``gather_edges``, ``gather_nodes``,
``cat_neighbors_nodes``, ``NeighborAttention``, ``TransformerLayer``), struct2seq/protein_features.py
(``ProteinFeatures._dist``, ``_rbf``) and struct2seq/struct2seq.py (``Struct2Seq.forward``'s encoder), commit
22e497a (Ingraham et al. 2019, "Generative models for graph-based protein design"): attention over each residue's
k nearest neighbours. ``_dist``: ``mask_2D`` the outer product of the residue mask, pairwise distances of the
C-alpha coordinates, padded pairs pushed past ``D_max``, ``topk(D_adjust, k, largest=False)`` ``(B, N, K)``; the
edges an RBF of the neighbour distances ``(B, N, K, 16)`` through ``W_e``; the nodes ``W_v``; the encoder's
``mask_attend = mask.unsqueeze(-1) * gather_nodes(mask.unsqueeze(-1), E_idx).squeeze(-1)`` and ``h_EV =
cat_neighbors_nodes(h_V, h_E, E_idx)`` ``(B, N, K, 2D)``. ``NeighborAttention``: ``Q = W_Q(h_V).view([B, N, 1, H, 1,
d])``, ``K = W_K(h_EV).view([B, N, K, H, d, 1])``, ``V = W_V(h_EV).view([B, N, K, H, d])``; ``matmul(Q, K).view([B,
N, K, H]).transpose(-2, -1)`` ``(B, N, H, K)`` over ``sqrt(d)``; the masked softmax over the neighbours (the mask
``unsqueeze(2).expand(-1, -1, H, -1)``, ``torch.where(mask > 0, logits, finfo.min)``, ``softmax(dim=-1)``, times the
mask); ``matmul(attend.unsqueeze(-2), V.transpose(2, 3))`` ``(B, N, H, 1, d)``, ``view([B, N, D])``, ``W_O``; the
layer's ``Normalize``, feed-forward and ``mask_V``. (``np.sqrt`` / ``np.finfo`` written with ``math`` / ``torch``.)

Bugs: ``logits-viewed-heads-first``: ``matmul(Q, K).view([B, N, H, K])`` for the ``view([B, N, K, H]).transpose(-2,
-1)`` (the ``(K, H)`` scores read ``(H, K)``: heads and neighbours interleaved); ``values-viewed-heads-first``: ``V
= W_V(h_EV).view([B, N, H, K, d])`` and ``matmul(attend.unsqueeze(-2), V)`` without the transpose;
``softmax-over-heads``: ``_masked_softmax(..., dim=-2)`` (the weights of each neighbour sum to one over the
heads)."""

import math
import sys

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn


def gather_edges(edges, neighbor_idx):
    neighbors = neighbor_idx.unsqueeze(-1).expand(-1, -1, -1, edges.size(-1))     # (B, N, K, C)
    return torch.gather(edges, 2, neighbors)


def gather_nodes(nodes, neighbor_idx):
    neighbors_flat = neighbor_idx.view((neighbor_idx.shape[0], -1))                 # (B, N·K)
    neighbors_flat = neighbors_flat.unsqueeze(-1).expand(-1, -1, nodes.size(2))     # (B, N·K, C)
    neighbor_features = torch.gather(nodes, 1, neighbors_flat)
    return neighbor_features.view(list(neighbor_idx.shape)[:3] + [-1])             # (B, N, K, C)


def cat_neighbors_nodes(h_nodes, h_neighbors, E_idx):  # noqa: N803
    return torch.cat([h_neighbors, gather_nodes(h_nodes, E_idx)], -1)               # (B, N, K, 2C)


class Normalize(nn.Module):
    def __init__(self, features, epsilon=1e-6):
        super().__init__()
        self.gain, self.bias = nn.Parameter(torch.ones(features)), nn.Parameter(torch.zeros(features))
        self.epsilon = epsilon

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        sigma = torch.sqrt(x.var(-1, keepdim=True) + self.epsilon)
        return self.gain * (x - mu) / (sigma + self.epsilon) + self.bias


class NeighborAttention(nn.Module):
    def __init__(self, num_hidden, num_in, num_heads=4, bug=""):
        super().__init__()
        self.num_heads, self.num_hidden, self.bug = num_heads, num_hidden, bug
        self.W_Q = nn.Linear(num_hidden, num_hidden, bias=False)
        self.W_K = nn.Linear(num_in, num_hidden, bias=False)
        self.W_V = nn.Linear(num_in, num_hidden, bias=False)
        self.W_O = nn.Linear(num_hidden, num_hidden, bias=False)

    def _masked_softmax(self, attend_logits, mask_attend, dim=-1):
        negative_inf = torch.finfo(torch.float32).min
        attend_logits = torch.where(mask_attend > 0, attend_logits, torch.tensor(negative_inf))
        return mask_attend * F.softmax(attend_logits, dim)

    def forward(self, h_V, h_E, mask_attend):  # noqa: N803
        n_batch, n_nodes, n_neighbors = h_E.shape[:3]
        n_heads = self.num_heads
        d = int(self.num_hidden / n_heads)
        Q = self.W_Q(h_V).view([n_batch, n_nodes, 1, n_heads, 1, d])                 # (B, N, 1, H, 1, d)
        K = self.W_K(h_E).view([n_batch, n_nodes, n_neighbors, n_heads, d, 1])       # (B, N, K, H, d, 1)
        if self.bug == "logits-viewed-heads-first":
            attend_logits = torch.matmul(Q, K).view([n_batch, n_nodes, n_heads, n_neighbors])   # read as (B, N, H, K)
        else:
            attend_logits = torch.matmul(Q, K).view([n_batch, n_nodes, n_neighbors, n_heads]).transpose(-2, -1)
        attend_logits = attend_logits / math.sqrt(d)                                 # (B, N, H, K)
        mask = mask_attend.unsqueeze(2).expand(-1, -1, n_heads, -1)                 # (B, N, H, K)
        attend = self._masked_softmax(attend_logits, mask, dim=-2 if self.bug == "softmax-over-heads" else -1)
        if self.bug == "values-viewed-heads-first":
            V = self.W_V(h_E).view([n_batch, n_nodes, n_heads, n_neighbors, d])      # read as (B, N, H, K, d)
        else:
            V = self.W_V(h_E).view([n_batch, n_nodes, n_neighbors, n_heads, d]).transpose(2, 3)   # (B, N, H, K, d)
        h_V_update = torch.matmul(attend.unsqueeze(-2), V)                           # (B, N, H, 1, d)
        return self.W_O(h_V_update.view([n_batch, n_nodes, self.num_hidden]))


class Struct2SeqEncoder(nn.Module):
    def __init__(self, node_features, num_rbf, hidden_dim, num_heads, top_k, bug=""):
        super().__init__()
        self.top_k, self.num_rbf = top_k, num_rbf
        self.W_v = nn.Linear(node_features, hidden_dim)
        self.W_e = nn.Linear(num_rbf, hidden_dim)
        self.attention = NeighborAttention(hidden_dim, hidden_dim * 2, num_heads, bug)
        self.norm = nn.ModuleList([Normalize(hidden_dim) for _ in range(2)])
        self.dense = nn.Sequential(nn.Linear(hidden_dim, hidden_dim * 4), nn.ReLU(),
                                   nn.Linear(hidden_dim * 4, hidden_dim))

    def _dist(self, X, mask, eps=1e-6):  # noqa: N803
        mask_2D = torch.unsqueeze(mask, 1) * torch.unsqueeze(mask, 2)               # (B, N, N)
        dX = torch.unsqueeze(X, 1) - torch.unsqueeze(X, 2)                         # (B, N, N, 3)
        D = mask_2D * torch.sqrt(torch.sum(dX ** 2, 3) + eps)
        D_max, _ = torch.max(D, -1, keepdim=True)
        D_adjust = D + (1.0 - mask_2D) * D_max
        return torch.topk(D_adjust, self.top_k, dim=-1, largest=False)              # (B, N, K) twice

    def _rbf(self, D):  # noqa: N803
        D_mu = torch.linspace(0.0, 20.0, self.num_rbf).view([1, 1, 1, -1])
        D_sigma = 20.0 / self.num_rbf
        return torch.exp(-((torch.unsqueeze(D, -1) - D_mu) / D_sigma) ** 2)       # (B, N, K, num_rbf)

    def forward(self, X, V, mask):  # noqa: N803
        D_neighbors, E_idx = self._dist(X, mask)
        h_V = self.W_v(V)                                                            # (B, N, D)
        h_E = self.W_e(self._rbf(D_neighbors))                                       # (B, N, K, D)
        mask_attend = gather_nodes(mask.unsqueeze(-1), E_idx).squeeze(-1)          # (B, N, K)
        mask_attend = mask.unsqueeze(-1) * mask_attend
        h_EV = cat_neighbors_nodes(h_V, h_E, E_idx)                                  # (B, N, K, 2D)
        h_V = self.norm[0](h_V + self.attention(h_V, h_EV, mask_attend))
        h_V = self.norm[1](h_V + self.dense(h_V))
        return mask.unsqueeze(-1) * h_V


BUGS = ("logits-viewed-heads-first", "values-viewed-heads-first", "softmax-over-heads")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 K=5",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 K=3"}
NODE_FEATURES, NUM_RBF = 6, 16


def build(bug="", B=2, T=6, D=32, H=4, K=5):  # noqa: N803
    """``B`` chains of ``T`` residues (C-alpha coordinates and 6 dihedral features each), the last chain's last
    ``T // 2`` residues padded, so that its real residues have padded ones among their ``K`` nearest."""
    torch.manual_seed(0)
    mask = torch.ones(B, T)
    mask[-1, T - T // 2:] = 0.0
    inputs = (torch.randn(B, T, 3) * 3.0, torch.randn(B, T, NODE_FEATURES), mask)
    return Struct2SeqEncoder(NODE_FEATURES, NUM_RBF, D, H, K, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

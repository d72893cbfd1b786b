"""microsoft/Graphormer, graphormer/modules/graphormer_layers.py (``GraphNodeFeature``, ``GraphAttnBias``) and
graphormer/modules/multihead_attention.py (fairseq's ``MultiheadAttention``, ``attn_bias`` added): a graph
token prepended to the node features ``(B, N+1, D)``, transposed to fairseq's ``(T, B, D)``; the attention bias
``attn_bias.unsqueeze(1).repeat(1, H, 1, 1)`` ``(B, H, N+1, N+1)``, the spatial bias ``spatial_pos_encoder(
spatial_pos).permute(0, 3, 1, 2)`` (an Embedding of shortest-path distances ``(B, N, N, H)``) added to
``[:, :, 1:, 1:]``, the graph token's virtual distance ``graph_token_virtual_distance.weight.view(1, H, 1)``
added to row 0 and column 0; fairseq: ``q * scaling``, ``q.contiguous().view(T, B * H, d).transpose(0, 1)``,
``torch.bmm(q, k.transpose(1, 2))``, ``attn_weights + attn_bias.view(B * H, T, T)``, softmax, ``bmm`` with v,
``transpose(0, 1).contiguous().view(T, B, D)``, ``out_proj``. Here N = T nodes.

Bugs (argument): ``spatial-bias-reshaped``: the spatial bias ``(B, N, N, H)`` brought to ``(B, H, N, N)`` with
``reshape`` where ``permute(0, 3, 1, 2)`` is meant; ``bias-heads-major``: the bias flattened
``attn_bias.transpose(0, 1).reshape(B * H, T, T)`` (heads-major, against fairseq's batch-major ``B * H``)."""

import sys

import torch
from torch import nn


class MultiheadAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.scaling = self.head_dim**-0.5
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, query, attn_bias):                                           # (T, B, D), (B, H, T, T)
        tgt_len, bsz, embed_dim = query.size()
        q = self.q_proj(query) * self.scaling
        k, v = self.k_proj(query), self.v_proj(query)
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        k = k.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        v = v.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        attn_weights = torch.bmm(q, k.transpose(1, 2))                               # (B*H, T, T)
        if self.bug == "bias-heads-major":
            attn_bias = attn_bias.transpose(0, 1).reshape(bsz * self.num_heads, tgt_len, tgt_len)
        else:
            attn_bias = attn_bias.view(bsz * self.num_heads, tgt_len, tgt_len)
        attn_weights = attn_weights + attn_bias
        attn_probs = torch.softmax(attn_weights, dim=-1)
        attn = torch.bmm(attn_probs, v)                                              # (B*H, T, d)
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        return self.out_proj(attn)


class GraphAttnBias(nn.Module):
    def __init__(self, heads, num_spatial=8, bug=""):
        super().__init__()
        self.num_heads, self.bug = heads, bug
        self.spatial_pos_encoder = nn.Embedding(num_spatial, heads, padding_idx=0)
        self.graph_token_virtual_distance = nn.Embedding(1, heads)

    def forward(self, attn_bias, spatial_pos):                                     # (B, N+1, N+1), (B, N, N)
        n_graph, n_node = spatial_pos.size()[:2]
        graph_attn_bias = attn_bias.clone().unsqueeze(1).repeat(1, self.num_heads, 1, 1)
        spatial = self.spatial_pos_encoder(spatial_pos)                              # (B, N, N, H)
        if self.bug == "spatial-bias-reshaped":
            spatial_pos_bias = spatial.reshape(n_graph, self.num_heads, n_node, n_node)
        else:
            spatial_pos_bias = spatial.permute(0, 3, 1, 2)                           # (B, H, N, N)
        graph_attn_bias[:, :, 1:, 1:] = graph_attn_bias[:, :, 1:, 1:] + spatial_pos_bias
        t = self.graph_token_virtual_distance.weight.view(1, self.num_heads, 1)
        graph_attn_bias[:, :, 1:, 0] = graph_attn_bias[:, :, 1:, 0] + t
        graph_attn_bias[:, :, 0, :] = graph_attn_bias[:, :, 0, :] + t
        return graph_attn_bias + attn_bias.unsqueeze(1)


class GraphormerLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.graph_token = nn.Embedding(1, dim)
        self.bias = GraphAttnBias(heads, bug=bug)
        self.self_attn = MultiheadAttention(dim, heads, bug)
        self.norm = nn.LayerNorm(dim)

    def forward(self, node_feature, attn_bias, spatial_pos):                       # (B, N, D)
        n_graph = node_feature.size(0)
        graph_token_feature = self.graph_token.weight.unsqueeze(0).repeat(n_graph, 1, 1)
        x = torch.cat([graph_token_feature, node_feature], dim=1)                    # (B, N+1, D)
        bias = self.bias(attn_bias, spatial_pos)
        x = x.transpose(0, 1)                                                        # (N+1, B, D)
        x = self.norm(x + self.self_attn(x, bias))
        return x.transpose(0, 1)


BUGS = ("spatial-bias-reshaped", "bias-heads-major")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    spatial_pos = torch.randint(1, 8, (B, T, T))
    attn_bias = torch.zeros(B, T + 1, T + 1)
    return GraphormerLayer(D, H, bug).eval(), (torch.randn(B, T, D), attn_bias, spatial_pos)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""deepmodeling/Uni-Mol, unimol/models/unimol.py (``UniMolModel.forward``'s ``get_dist_features``,
``GaussianLayer``, ``NonLinearHead``, ``DistanceHead``) and unimol/models/transformer_encoder_with_pair.py
(``TransformerEncoderWithPair``, ``fill_attn_mask``), with dptech-corp/Uni-Core's
unicore/modules/multihead_attention.py (``SelfMultiheadAttention``, ``return_attn=True``) and
transformer_encoder_layer.py (pre-LN), commit f7a2052: atom ids ``(B, N)`` (0 pads), pairwise distances and
edge types ``(B, N, N)``; a Gaussian basis of each distance ``(B, N, N, K)`` projected to one bias per head
``(B, N, N, H)``, ``permute(0, 3, 1, 2).contiguous().view(-1, N, N)`` (batch-major ``(B*H, N, N)`` rows, the
fold of the attention's ``view(bsz * num_heads, ...)``); padded keys filled with ``-inf`` through
``view(B, -1, N, N)`` and ``padding_mask.unsqueeze(1).unsqueeze(2)``; each layer adds the bias to its
``bmm(q, k^T)`` scores and hands the biased scores on as the next layer's bias (the pair representation); at the
end the pair representation is read back ``view(bsz, -1, N, N).permute(0, 2, 3, 1)`` ``(B, N, N, H)``, its
``-inf`` set to 0, and ``DistanceHead`` maps the heads to one distance per pair, symmetrised.

Bugs: ``bias-view-without-permute``: ``gbf_result.contiguous().view(-1, N, N)`` straight from ``(B, N, N, H)``:
each head's bias is a strip of other atoms' pairs and heads (the view that runs because ``B*N*N*H`` divides);
``pair-out-head-major``: the pair representation read back as ``view(-1, bsz, N, N).permute(1, 2, 3, 0)`` (the
head-major unfold of other fairseq ports) from batch-major rows: molecules and heads mixed in the distance head."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def gaussian(x, mean, std):
    a = (2 * 3.14159) ** 0.5
    return torch.exp(-0.5 * (((x - mean) / std) ** 2)) / (a * std)


class GaussianLayer(nn.Module):
    def __init__(self, K=16, edge_types=64):
        super().__init__()
        self.K = K
        self.means = nn.Embedding(1, K)
        self.stds = nn.Embedding(1, K)
        self.mul = nn.Embedding(edge_types, 1)
        self.bias = nn.Embedding(edge_types, 1)
        nn.init.uniform_(self.means.weight, 0, 3)
        nn.init.uniform_(self.stds.weight, 0, 3)
        nn.init.constant_(self.bias.weight, 0)
        nn.init.constant_(self.mul.weight, 1)

    def forward(self, x, edge_type):                                     # (B, N, N), (B, N, N)
        mul = self.mul(edge_type).type_as(x)                             # (B, N, N, 1)
        bias = self.bias(edge_type).type_as(x)                           # (B, N, N, 1)
        x = mul * x.unsqueeze(-1) + bias                                 # (B, N, N, 1)
        x = x.expand(-1, -1, -1, self.K)                                 # (B, N, N, K)
        mean = self.means.weight.float().view(-1)                        # (K,)
        std = self.stds.weight.float().view(-1).abs() + 1e-5             # (K,)
        return gaussian(x.float(), mean, std).type_as(self.means.weight)


class NonLinearHead(nn.Module):
    def __init__(self, input_dim, out_dim, hidden=None):
        super().__init__()
        hidden = hidden or input_dim
        self.linear1 = nn.Linear(input_dim, hidden)
        self.linear2 = nn.Linear(hidden, out_dim)

    def forward(self, x):
        return self.linear2(F.gelu(self.linear1(x)))


class SelfMultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.in_proj = nn.Linear(embed_dim, embed_dim * 3)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, query, attn_bias):                                 # (B, N, D), (B*H, N, N)
        bsz, tgt_len, embed_dim = query.size()
        q, k, v = self.in_proj(query).chunk(3, dim=-1)                   # (B, N, D)
        q = (q.view(bsz, tgt_len, self.num_heads, self.head_dim)         # (B, N, H, d_k)
             .transpose(1, 2).contiguous()                               # (B, H, N, d_k)
             .view(bsz * self.num_heads, -1, self.head_dim) * self.scaling)   # (B*H, N, d_k)
        k = (k.view(bsz, -1, self.num_heads, self.head_dim)              # (B, N, H, d_k)
             .transpose(1, 2).contiguous()                               # (B, H, N, d_k)
             .view(bsz * self.num_heads, -1, self.head_dim))             # (B*H, N, d_k)
        v = (v.view(bsz, -1, self.num_heads, self.head_dim)              # (B, N, H, d_k)
             .transpose(1, 2).contiguous()                               # (B, H, N, d_k)
             .view(bsz * self.num_heads, -1, self.head_dim))             # (B*H, N, d_k)
        attn_weights = torch.bmm(q, k.transpose(1, 2))                   # (B*H, N, N)
        attn_weights += attn_bias
        attn = F.softmax(attn_weights, dim=-1)                           # (B*H, N, N)
        o = torch.bmm(attn, v)                                           # (B*H, N, d_k)
        o = (o.view(bsz, self.num_heads, tgt_len, self.head_dim)         # (B, H, N, d_k)
             .transpose(1, 2).contiguous()                               # (B, N, H, d_k)
             .view(bsz, tgt_len, embed_dim))                             # (B, N, D)
        return self.out_proj(o), attn_weights


class TransformerEncoderLayer(nn.Module):
    def __init__(self, embed_dim, ffn_embed_dim, attention_heads):
        super().__init__()
        self.self_attn = SelfMultiheadAttention(embed_dim, attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, ffn_embed_dim)
        self.fc2 = nn.Linear(ffn_embed_dim, embed_dim)
        self.final_layer_norm = nn.LayerNorm(embed_dim)

    def forward(self, x, attn_bias):
        residual = x
        x = self.self_attn_layer_norm(x)
        x, attn_weights = self.self_attn(x, attn_bias)
        x = residual + x
        residual = x
        x = self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))
        return residual + x, attn_weights


class DistanceHead(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.dense = nn.Linear(heads, heads)
        self.layer_norm = nn.LayerNorm(heads)
        self.out_proj = nn.Linear(heads, 1)

    def forward(self, x):                                                # (B, N, N, H)
        bsz, seq_len, seq_len, _ = x.size()
        x = self.layer_norm(F.gelu(self.dense(x)))
        x = self.out_proj(x).view(bsz, seq_len, seq_len)                 # (B, N, N)
        return (x + x.transpose(-1, -2)) * 0.5


class UniMol(nn.Module):
    def __init__(self, vocab, embed_dim, heads, layers=2, K=16, bug=""):
        super().__init__()
        self.bug = bug
        self.padding_idx = 0
        self.embed_tokens = nn.Embedding(vocab, embed_dim, self.padding_idx)
        self.gbf = GaussianLayer(K, vocab * vocab)
        self.gbf_proj = NonLinearHead(K, heads)
        self.emb_layer_norm = nn.LayerNorm(embed_dim)
        self.layers = nn.ModuleList([TransformerEncoderLayer(embed_dim, 2 * embed_dim, heads) for _ in range(layers)])
        self.final_layer_norm = nn.LayerNorm(embed_dim)
        self.dist_head = DistanceHead(heads)

    def get_dist_features(self, dist, et):
        n_node = dist.size(-1)
        gbf_feature = self.gbf(dist, et)                                 # (B, N, N, K)
        gbf_result = self.gbf_proj(gbf_feature)                          # (B, N, N, H)
        if self.bug == "bias-view-without-permute":
            return gbf_result.contiguous().view(-1, n_node, n_node)      # (B*H, N, N)
        graph_attn_bias = gbf_result.permute(0, 3, 1, 2).contiguous()    # (B, H, N, N)
        return graph_attn_bias.view(-1, n_node, n_node)                  # (B*H, N, N)

    def forward(self, src_tokens, src_distance, src_edge_type):          # (B, N), (B, N, N), (B, N, N)
        padding_mask = src_tokens.eq(self.padding_idx)                   # (B, N)
        x = self.embed_tokens(src_tokens)                                # (B, N, D)
        attn_mask = self.get_dist_features(src_distance, src_edge_type)  # (B*H, N, N)
        bsz, seq_len = x.size(0), x.size(1)
        x = self.emb_layer_norm(x)
        x = x * (1 - padding_mask.unsqueeze(-1).type_as(x))              # (B, N, D)
        attn_mask = attn_mask.view(bsz, -1, seq_len, seq_len)            # (B, H, N, N)
        attn_mask = attn_mask.masked_fill(padding_mask.unsqueeze(1).unsqueeze(2), float("-inf"))
        attn_mask = attn_mask.view(-1, seq_len, seq_len)                 # (B*H, N, N)
        for layer in self.layers:
            x, attn_mask = layer(x, attn_mask)
        x = self.final_layer_norm(x)
        if self.bug == "pair-out-head-major":
            pair = attn_mask.view(-1, bsz, seq_len, seq_len).permute(1, 2, 3, 0)   # (B, N, N, H)
        else:
            pair = attn_mask.view(bsz, -1, seq_len, seq_len).permute(0, 2, 3, 1)   # (B, N, N, H)
        pair = pair.contiguous()
        pair = pair.masked_fill(pair == float("-inf"), 0)
        return x, self.dist_head(pair)


BUGS = ("bias-view-without-permute", "pair-out-head-major")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = UniMol(vocab=8, embed_dim=D, heads=H, bug=bug).eval()
    tokens = torch.randint(1, 8, (B, T))
    tokens[-1, -2:] = 0                                                  # (a smaller molecule, padded)
    coord = torch.randn(B, T, 3)
    distance = (coord.unsqueeze(1) - coord.unsqueeze(2)).norm(dim=-1)    # (B, N, N)
    edge_type = tokens.unsqueeze(-1) * 8 + tokens.unsqueeze(1)           # (B, N, N)
    return model, (tokens, distance, edge_type)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""rampasek/GraphGPS ``graphgps/layer/gps_layer.py`` (``GPSLayer`` with ``global_model_type="Transformer"``) and
pyg-team/pytorch_geometric ``torch_geometric/utils/_to_dense_batch.py`` (``to_dense_batch``; 2022-2024): the nodes
of several graphs packed in one ``[num_nodes, F]`` tensor with a ``batch`` vector of graph ids; ``to_dense_batch``
counts the nodes per graph (``scatter`` of ones), takes the cumulative sum, puts node ``i`` at ``batch[i] *
max_num_nodes + (i - cum_nodes[batch[i]])`` of a ``[batch_size * max_num_nodes, F]`` buffer filled with zeros and
views it ``[batch_size, max_num_nodes, F]``, with a boolean ``mask`` of real nodes built the same way; the layer
runs dense multi-head attention with ``key_padding_mask=~mask`` (GraphGPS hands it to ``nn.MultiheadAttention``
with ``batch_first=True``; written out here: heads split, scores, the padded keys filled with the lowest value,
softmax over the keys, heads merged), then ``h_attn[mask]`` takes the real nodes back to the packed layout.

Bugs: ``mask-not-inverted``: ``key_padding_mask=mask`` (the real nodes hidden, the padding attended: PyTorch's
``key_padding_mask`` is True where a key is *ignored*); ``dense-index-node-major``: the dense index computed
``(i - cum_nodes[batch[i]]) * batch_size + batch[i]`` (node-major) while the buffer is viewed ``[batch_size,
max_num_nodes, F]`` (graph-major), for the features and the mask alike: the rows of the dense batch mix nodes of
different graphs, and the graphs attend each other."""

import sys

import torch
from torch import nn

BUGS = ("mask-not-inverted", "dense-index-node-major")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def to_dense_batch(x, batch, bug=""):
    batch_size = int(batch.max()) + 1
    num_nodes = torch.zeros(batch_size, dtype=torch.long).scatter_add_(0, batch, torch.ones_like(batch))   # (B,)
    max_num_nodes = int(num_nodes.max())
    cum_nodes = torch.cat([batch.new_zeros(1), num_nodes.cumsum(dim=0)])         # (B + 1,)
    local = torch.arange(batch.size(0)) - cum_nodes[batch]                       # (N_all,)
    if bug == "dense-index-node-major":
        idx = local * batch_size + batch                                         # (N_all,)
    else:
        idx = batch * max_num_nodes + local                                      # (N_all,)
    size = [batch_size * max_num_nodes] + list(x.size())[1:]
    out = x.new_zeros(size)                                                      # (B·T, F)
    out[idx] = x
    out = out.view([batch_size, max_num_nodes] + list(x.size())[1:])             # (B, T, F)
    mask = torch.zeros(batch_size * max_num_nodes, dtype=torch.bool)
    mask[idx] = True
    mask = mask.view(batch_size, max_num_nodes)                                  # (B, T)
    return out, mask


class DenseMultiheadAttention(nn.Module):
    def __init__(self, dim_h, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim_h // num_heads
        self.in_proj = nn.Linear(dim_h, 3 * dim_h)
        self.out_proj = nn.Linear(dim_h, dim_h)

    def forward(self, x, key_padding_mask):
        bsz, n, dim = x.shape
        q, k, v = self.in_proj(x).chunk(3, dim=-1)                               # (B, T, D) each
        q, k, v = (t.view(bsz, n, self.num_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))   # (B, H, T, d)
        scores = q @ k.transpose(-2, -1) / self.head_dim ** 0.5                  # (B, H, T, T)
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], torch.finfo(scores.dtype).min)
        attn = scores.softmax(dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(bsz, n, dim)                    # (B, T, D)
        return self.out_proj(out)


class GPSLayer(nn.Module):
    def __init__(self, dim_h, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.self_attn = DenseMultiheadAttention(dim_h, num_heads)
        self.norm1_attn = nn.LayerNorm(dim_h)

    def forward(self, h, batch):
        h_in1 = h                                                                # (N_all, D)
        h_dense, mask = to_dense_batch(h, batch, self.bug)   # (B, T, D), (B, T)
        key_padding_mask = mask if self.bug == "mask-not-inverted" else ~mask
        h_attn = self.self_attn(h_dense, key_padding_mask)                       # (B, T, D)
        h_attn = h_attn[mask]                                                    # (N_all, D)
        return self.norm1_attn(h_in1 + h_attn)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    counts = [T] + [T - 1 - (i % 2) for i in range(1, B)]                        # the first graph the largest
    batch = torch.cat([torch.full((c,), g, dtype=torch.long) for g, c in enumerate(counts)])
    return GPSLayer(D, H, bug).eval(), (torch.randn(len(batch), D), batch)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""gordicaleksa/pytorch-GAT, models/definitions/GAT.py (``GATLayerImp2`` and ``GATLayer.skip_concat_bias``,
commit 66da1e7): dense multi-head graph attention over N nodes, no batch. ``linear_proj(x).view(-1, NH, FOUT)``
``(N, NH, FOUT)``; ``scores_source = torch.sum(proj * scoring_fn_source, dim=-1, keepdim=True)`` ``(N, NH, 1)``,
``.transpose(0, 1)`` ``(NH, N, 1)``; ``scores_target`` the same, ``.permute(1, 2, 0)`` ``(NH, 1, N)``;
``LeakyReLU(source + target)`` ``(NH, N, N)`` by broadcast, plus the ``(N, N)`` connectivity mask (``-inf`` where
there is no edge), ``Softmax(dim=-1)``; ``torch.bmm(att, proj.transpose(0, 1))`` ``(NH, N, FOUT)``,
``.permute(1, 0, 2)`` back to ``(N, NH, FOUT)``; the skip ``skip_proj(x).view(-1, NH, FOUT)`` added, then
``view(-1, NH * FOUT)`` (``concat=True``) or ``mean(dim=1)`` over the heads (``concat=False``, the output layer
of the PPI model), a bias and ELU.

Bugs: ``reshape-instead-of-permute``: ``out.reshape(N, NH, FOUT)`` for ``out.permute(1, 0, 2)`` (the author's own
comment at that line: "I made a silly mistake of using reshape instead of permute thinking it will end up doing
the same thing, but it didn't! The acc on Cora didn't go above 52%"); ``skip-view-head-major``: the skip read
``skip_proj(x).view(NH, -1, FOUT).transpose(0, 1)``, as if the projection's ``NH * FOUT`` rows were head-major
over the nodes.

``heads-averaged`` (``concat=False``, the heads averaged by ``mean(dim=1)``: the PPI model's output layer, correct)
was kept out of ``TWINS`` while the engine called it ``✗ reduction-over-wrong-axis`` (the trace of nanoGPT's
``sum-heads`` bug: per-head outputs reduced over a named heads axis). Since the headsmean round
(engine/rules/averaged_heads.py) a mean along the heads alone of the heads' outputs is the warning
``heads-averaged``, which says it is right only where the model means to average its heads: a twin, ``!``."""

import sys

import torch
from torch import nn


class GATLayerImp2(nn.Module):
    head_dim = 1

    def __init__(self, num_in_features, num_out_features, num_of_heads, concat=True, bug=""):
        super().__init__()
        self.num_of_heads, self.num_out_features, self.concat, self.bug = num_of_heads, num_out_features, concat, bug
        self.linear_proj = nn.Linear(num_in_features, num_of_heads * num_out_features, bias=False)
        self.scoring_fn_source = nn.Parameter(torch.randn(1, num_of_heads, num_out_features))
        self.scoring_fn_target = nn.Parameter(torch.randn(1, num_of_heads, num_out_features))
        self.skip_proj = nn.Linear(num_in_features, num_of_heads * num_out_features, bias=False)
        self.bias = nn.Parameter(torch.zeros(num_of_heads * num_out_features if concat else num_out_features))
        self.leakyReLU = nn.LeakyReLU(0.2)
        self.softmax = nn.Softmax(dim=-1)
        self.activation = nn.ELU()

    def forward(self, data):
        in_nodes_features, connectivity_mask = data                                  # (N, FIN), (N, N)
        num_of_nodes = in_nodes_features.shape[0]
        nh, fout = self.num_of_heads, self.num_out_features
        nodes_features_proj = self.linear_proj(in_nodes_features).view(-1, nh, fout)  # (N, NH, FOUT)
        scores_source = torch.sum(nodes_features_proj * self.scoring_fn_source, dim=-1, keepdim=True)  # (N, NH, 1)
        scores_target = torch.sum(nodes_features_proj * self.scoring_fn_target, dim=-1, keepdim=True)  # (N, NH, 1)
        scores_source = scores_source.transpose(0, 1)                               # (NH, N, 1)
        scores_target = scores_target.permute(1, 2, 0)                              # (NH, 1, N)
        all_scores = self.leakyReLU(scores_source + scores_target)                  # (NH, N, N)
        all_attention_coefficients = self.softmax(all_scores + connectivity_mask)   # (NH, N, N)
        out_nodes_features = torch.bmm(all_attention_coefficients, nodes_features_proj.transpose(0, 1))  # (NH, N, FOUT)
        if self.bug == "reshape-instead-of-permute":
            out_nodes_features = out_nodes_features.reshape(num_of_nodes, nh, -1)  # (N, NH, FOUT) [bug-reshape]
        else:
            out_nodes_features = out_nodes_features.permute(1, 0, 2)                # (N, NH, FOUT) [gat-out]
        return self.skip_concat_bias(in_nodes_features, out_nodes_features), connectivity_mask

    def skip_concat_bias(self, in_nodes_features, out_nodes_features):
        if not out_nodes_features.is_contiguous():
            out_nodes_features = out_nodes_features.contiguous()
        skip = self.skip_proj(in_nodes_features)                                    # (N, NH*FOUT)
        if self.bug == "skip-view-head-major":
            skip = skip.view(self.num_of_heads, -1, self.num_out_features).transpose(0, 1)  # (N, NH, FOUT) [bug-skip]
        else:
            skip = skip.view(-1, self.num_of_heads, self.num_out_features)          # (N, NH, FOUT)
        out_nodes_features = out_nodes_features + skip
        if self.concat:
            out_nodes_features = out_nodes_features.view(-1, self.num_of_heads * self.num_out_features)  # (N, NH*FOUT)
        else:
            out_nodes_features = out_nodes_features.mean(dim=self.head_dim)         # (N, FOUT)
        return self.activation(out_nodes_features + self.bias)


BUGS = ("reshape-instead-of-permute", "skip-view-head-major")
TWINS = ("heads-averaged",)
DIMS = ("T=7 D=16 H=4",)
EQUAL = {"T=7 D=16 H=4": "T=4 D=16 H=4"}


def build(bug="", T=7, D=16, H=4):
    torch.manual_seed(0)
    adj = (torch.rand(T, T) < 0.4) | torch.eye(T, dtype=torch.bool)
    adj = adj | adj.T
    mask = torch.zeros(T, T).masked_fill(~adj, float("-inf"))                      # (N, N)
    layer = GATLayerImp2(D, D // H, H, concat=bug != "heads-averaged", bug=bug).eval()
    return (lambda x, m: layer((x, m))[0]), (torch.randn(T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

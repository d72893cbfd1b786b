"""NX-AI/xlstm, xlstm/blocks/mlstm/backends.py (``parallel_stabilized_simple``), xlstm/blocks/mlstm/cell.py
(``mLSTMCell.forward``) and xlstm/components/ln.py (``MultiHeadLayerNorm``): the mLSTM's parallel form, a
retention-like attention with a learned, data-dependent decay. The cell views q, k, v ``(B, S, NH, DH)`` and
transposes them ``(B, NH, S, DH)``; the input and forget gates come from ``Linear(3 * embedding_dim, num_heads)``
on ``cat([q, k, v], dim=-1)``, ``transpose(-1, -2).unsqueeze(-1)`` to ``(B, NH, S, 1)``. The backend:
``log_fgates = logsigmoid(fgate_preact)``, ``log_fgates_cumsum = cat([zeros, cumsum(log_fgates, dim=-2)], dim=-2)``
``(B, NH, S+1, 1)``, ``repeat(1, 1, 1, S + 1)``, the decay matrix ``rep - rep.transpose(-2, -1)`` (row ``i``
minus column ``j``: the log forget gates between ``j`` and ``i``) kept on the lower triangle ``ltr`` (``-inf``
above), ``+ igate_preact.transpose(-2, -1)`` (each key's input gate on its column), the row max subtracted,
``exp``; ``C = (q @ (k / sqrt(DH)).transpose(-2, -1)) * D``; ``normalizer = maximum(C.sum(dim=-1).abs(),
exp(-max_log_D))``; ``(C / (normalizer + eps)) @ v``. ``MultiHeadLayerNorm``: ``transpose(1, 2).reshape(B * S, NH
* DH)``, ``group_norm(num_groups=NH)``, ``view(B, S, NH, DH).transpose(1, 2)``; the cell merges ``transpose(1,
2).reshape(B, S, -1)``.

Bugs: ``decay-matrix-transposed``: ``rep.transpose(-2, -1) - rep`` (column minus row: under the lower triangle the
"decay" is the negated sum of log forget gates, a growth, so older tokens weigh more than recent ones);
``gates-view-not-transpose``: ``igate_preact.view(B, NH, S, 1)`` from ``(B, S, NH)`` (and the same for the forget
gate: the gates of heads and tokens interleaved); ``igate-on-query-rows``: ``log_fg_matrix + igate_preact`` without
the transpose (each query's own input gate added on its row, where the row-wise stabiliser removes it again: the
keys' input gates are lost)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


def parallel_stabilized_simple(queries, keys, values, igate_preact, fgate_preact, eps=1e-6, bug=""):
    B, NH, S, DH = queries.shape
    log_fgates = F.logsigmoid(fgate_preact)                                          # (B, NH, S, 1)
    ltr = torch.tril(torch.ones((S, S), dtype=torch.bool))
    log_fgates_cumsum = torch.cat([torch.zeros((B, NH, 1, 1)), torch.cumsum(log_fgates, dim=-2)], dim=-2)
    rep_log_fgates_cumsum = log_fgates_cumsum.repeat(1, 1, 1, S + 1)                 # (B, NH, S+1, S+1)
    if bug == "decay-matrix-transposed":
        _log_fg_matrix = rep_log_fgates_cumsum.transpose(-2, -1) - rep_log_fgates_cumsum
    else:
        _log_fg_matrix = rep_log_fgates_cumsum - rep_log_fgates_cumsum.transpose(-2, -1)   # (B, NH, S+1, S+1)
    log_fg_matrix = torch.where(ltr, _log_fg_matrix[:, :, 1:, 1:], -float("inf"))   # (B, NH, S, S)
    if bug == "igate-on-query-rows":
        log_D_matrix = log_fg_matrix + igate_preact
    else:
        log_D_matrix = log_fg_matrix + igate_preact.transpose(-2, -1)                # (B, NH, S, S)
    max_log_D, _ = torch.max(log_D_matrix, dim=-1, keepdim=True)                     # (B, NH, S, 1)
    D_matrix = torch.exp(log_D_matrix - max_log_D)                                   # (B, NH, S, S)
    keys_scaled = keys / math.sqrt(DH)
    qk_matrix = queries @ keys_scaled.transpose(-2, -1)                              # (B, NH, S, S)
    C_matrix = qk_matrix * D_matrix
    normalizer = torch.maximum(C_matrix.sum(dim=-1, keepdim=True).abs(), torch.exp(-max_log_D))   # (B, NH, S, 1)
    C_matrix_normalized = C_matrix / (normalizer + eps)
    return C_matrix_normalized @ values                                              # (B, NH, S, DH)


class MultiHeadLayerNorm(nn.Module):
    def __init__(self, ndim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(ndim))
        self.eps = eps

    def forward(self, input):
        B, NH, S, DH = input.shape
        gn_in_1 = input.transpose(1, 2)                                              # (B, S, NH, DH)
        gn_in_2 = gn_in_1.reshape(B * S, NH * DH)                                    # (B·S, NH·DH)
        out = F.group_norm(gn_in_2, num_groups=NH, weight=1.0 + self.weight, eps=self.eps)
        return out.view(B, S, NH, DH).transpose(1, 2)                                # (B, NH, S, DH)


class mLSTMCell(nn.Module):  # noqa: N801
    def __init__(self, embedding_dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.igate = nn.Linear(3 * embedding_dim, num_heads)
        self.fgate = nn.Linear(3 * embedding_dim, num_heads)
        self.outnorm = MultiHeadLayerNorm(ndim=embedding_dim)

    def forward(self, q, k, v):
        B, S, _ = q.shape
        if_gate_input = torch.cat([q, k, v], dim=-1)                                 # (B, S, 3·H)
        q = q.view(B, S, self.num_heads, -1).transpose(1, 2)                         # (B, NH, S, DH)
        k = k.view(B, S, self.num_heads, -1).transpose(1, 2)                         # (B, NH, S, DH)
        v = v.view(B, S, self.num_heads, -1).transpose(1, 2)                         # (B, NH, S, DH)
        igate_preact = self.igate(if_gate_input)                                     # (B, S, NH)
        fgate_preact = self.fgate(if_gate_input)                                     # (B, S, NH)
        if self.bug == "gates-view-not-transpose":
            igate_preact = igate_preact.view(B, self.num_heads, S, 1)
            fgate_preact = fgate_preact.view(B, self.num_heads, S, 1)
        else:
            igate_preact = igate_preact.transpose(-1, -2).unsqueeze(-1)              # (B, NH, S, 1)
            fgate_preact = fgate_preact.transpose(-1, -2).unsqueeze(-1)              # (B, NH, S, 1)
        h_state = parallel_stabilized_simple(q, k, v, igate_preact, fgate_preact, bug=self.bug)   # (B, NH, S, DH)
        h_state_norm = self.outnorm(h_state)                                         # (B, NH, S, DH)
        return h_state_norm.transpose(1, 2).reshape(B, S, -1)                        # (B, S, H)


class mLSTMMixer(nn.Module):  # noqa: N801
    def __init__(self, embedding_dim, num_heads, bug=""):
        super().__init__()
        self.q_proj = nn.Linear(embedding_dim, embedding_dim, bias=False)
        self.k_proj = nn.Linear(embedding_dim, embedding_dim, bias=False)
        self.v_proj = nn.Linear(embedding_dim, embedding_dim, bias=False)
        self.mlstm_cell = mLSTMCell(embedding_dim, num_heads, bug)
        self.proj_down = nn.Linear(embedding_dim, embedding_dim, bias=False)

    def forward(self, x):
        h_tilde_state = self.mlstm_cell(q=self.q_proj(x), k=self.k_proj(x), v=self.v_proj(x))   # (B, S, H)
        return self.proj_down(h_tilde_state)


BUGS = ("decay-matrix-transposed", "gates-view-not-transpose", "igate-on-query-rows")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=5, D=32, H=4):  # noqa: N803
    """One mLSTM mixer (q, k, v straight from linear projections; xLSTM's conv and up-projection left out)."""
    torch.manual_seed(0)
    return mLSTMMixer(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

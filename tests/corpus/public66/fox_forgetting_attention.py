"""zhixuan-lin/forgetting-transformer, src/forgetting_transformer/model/forgetting_transformer/
modeling_forgetting_transformer.py (``ForgettingAttentionLayer.forward``, ``fgate_type="full"``, no shift, no
QK-norm, no output gate) with the attention itself as src/forgetting_transformer/ops/forgetting_attention.py's
``test_op`` reference computes it (the Triton kernel's plain-torch twin): the Forgetting Transformer (FoX), softmax
attention with a data-dependent forget gate per head and token. ``q, k`` split ``'... (h d) -> ... h d'``, ``v``
straight to ``'b t (h d) -> b h t d'``; the gate ``fgate_proj = Linear(hidden_size, num_heads, bias=True)``,
``rearrange(fgate_logit, "b t h -> b h t")``, ``logsigmoid``; ``k`` and ``q`` to ``'b t h d -> b h t d'``. The
reference: ``p = q @ k.transpose(2, 3) * sm_scale``, ``log_lambda = cumsum(log_fgate, dim=-1)``, ``decay_bias =
log_lambda[..., -M:, None] - log_lambda[..., None, :]`` (row ``i`` minus column ``j``: the log forget gates of the
tokens after ``j`` up to ``i``), ``p = p + decay_bias``, ``p[:, :, mask == 0] = -inf`` with ``mask = tril(ones(M,
N), diagonal=N - M)``, ``softmax``, ``matmul(p, v)``; then ``rearrange(o, "b h t d -> b t h d")``,
``reshape(batch_size, q_len, hidden_size)``, ``o_proj``.

Bugs: ``fgate-view-not-rearrange``: ``fgate_logit.view(b, h, t)`` for the rearrange (the gates of heads and
tokens interleaved: each head decays with other heads' gates at other positions, "decay applied per token instead
of per head"); ``cumsum-over-heads``: ``cumsum(log_fgate, dim=1)`` (the cumsum written for the documented
``(batch_size, seqlen_k, num_heads)`` layout after the gate was made head-first: it sums over heads, so the decay
no longer accumulates along the sequence); ``decay-bias-transposed``: ``log_lambda[..., None, :] -
log_lambda[..., -M:, None]`` (column minus row: under the causal mask the "decay" is a growth, older keys weigh
more)."""

import math
import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


def forgetting_attention_ref(q, k, v, log_fgate, sm_scale, bug=""):
    M, N = q.shape[2], k.shape[2]
    P_SEQ = N - M
    mask = torch.tril(torch.ones((M, N)), diagonal=P_SEQ)
    p = torch.matmul(q, k.transpose(2, 3)) * sm_scale                         # (b, h, M, N)
    log_lambda = torch.cumsum(log_fgate, dim=1 if bug == "cumsum-over-heads" else -1)   # (b, h, N)
    if bug == "decay-bias-transposed":
        decay_bias = log_lambda[..., None, :] - log_lambda[..., -M:, None]
    else:
        decay_bias = log_lambda[..., -M:, None] - log_lambda[..., None, :]     # (b, h, M, N)
    p = p + decay_bias
    p[:, :, mask == 0] = float("-inf")
    p = torch.softmax(p.float(), dim=-1)
    return torch.matmul(p, v)                                                 # (b, h, M, d)


class ForgettingAttentionLayer(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.hidden_size, self.num_heads, self.bug = hidden_size, num_heads, bug
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.fgate_proj = nn.Linear(hidden_size, num_heads, bias=True)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states):
        batch_size, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states)
        k = self.k_proj(hidden_states)
        v = self.v_proj(hidden_states)
        q = rearrange(q, "... (h d) -> ... h d", h=self.num_heads)            # (b, t, h, d)
        k = rearrange(k, "... (h d) -> ... h d", h=self.num_heads)            # (b, t, h, d)
        v = rearrange(v, "b t (h d) -> b h t d", h=self.num_heads)            # (b, h, t, d)
        fgate_logit = self.fgate_proj(hidden_states)                           # (b, t, h)
        if self.bug == "fgate-view-not-rearrange":
            fgate_logit = fgate_logit.view(batch_size, self.num_heads, q_len)
        else:
            fgate_logit = rearrange(fgate_logit, "b t h -> b h t")             # (b, h, t)
        log_fgate = F.logsigmoid(fgate_logit.float())
        k = rearrange(k, "b t h d -> b h t d")                                 # (b, h, t, d)
        q = rearrange(q, "b t h d -> b h t d")                                 # (b, h, t, d)
        o = forgetting_attention_ref(q, k, v, log_fgate, 1 / math.sqrt(self.head_dim), bug=self.bug)
        o = rearrange(o, "b h t d -> b t h d")                                 # (b, t, h, d)
        o = o.reshape(batch_size, q_len, self.hidden_size)                     # (b, t, h·d)
        return self.o_proj(o)


BUGS = ("fgate-view-not-rearrange", "cumsum-over-heads", "decay-bias-transposed")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=5, D=32, H=4):  # noqa: N803
    """One FoX attention layer (``use_rope=False``, the layer's default and the "Pro" configs' setting)."""
    torch.manual_seed(0)
    return ForgettingAttentionLayer(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

"""decisionintelligence/DUET issue #6 ("Incorrect Usage of einsum"; the maintainers: "your observations were
absolutely correct ... We are currently retesting the algorithm's performance"): the channel mask of DUET's
``Mahalanobis_mask`` measured the distance between two channels' spectra through a learnable matrix with
``temp = torch.einsum("dd,bxcd->bxcd", self.A, diff)``. A letter repeated in one operand takes that operand's
diagonal, so only ``A[d, d]`` scaled each frequency and the matrix's off-diagonal entries never mixed them; the
reporter's fix (the form found in DUET's released code) is ``torch.einsum("dk,bxck->bxcd", self.A, diff)``.

The idiom (ported to torch): a multivariate series ``(B, V, T)``; ``|rfft|`` of each channel ``(B, V, F)``,
pairwise differences ``(B, V, V, F)``, ``temp = einsum(A, diff)``, ``dist = einsum("bxcd,bxcd->bxc", temp, temp)``,
inverse distances with the diagonal zeroed, normalised by each row's maximum, the identity added back, and
``* 0.99``; DUET draws a Bernoulli mask from these probabilities with a Gumbel trick, here (eval, deterministic)
the mask is ``p > 0.5``. Each channel's series is embedded (``Linear(T, D)``) and a masked multi-head attention
runs across the V channels, ``(B, H, V, d)``, with the mask ``(B, 1, V, V)``.

Bug (argument): ``einsum-diagonal``: ``"dd,bxcd->bxcd"`` (the diagonal of A) in place of ``"dk,bxck->bxcd"``."""

import sys

import torch
from torch import nn

BUGS = ("einsum-diagonal",)
TWINS = ()
DIMS = ("B=2 V=5 T=10 D=32 H=4",)


class MahalanobisMask(nn.Module):
    def __init__(self, input_size, bug=""):
        super().__init__()
        self.bug = bug
        frequency_size = input_size // 2 + 1
        self.A = nn.Parameter(torch.randn(frequency_size, frequency_size) / frequency_size ** 0.5)

    def calculate_prob_distance(self, X):
        XF = torch.abs(torch.fft.rfft(X, dim=-1))                                       # (B, V, F)
        X1 = XF.unsqueeze(2)                                                            # (B, V, 1, F)
        X2 = XF.unsqueeze(1)                                                            # (B, 1, V, F)
        diff = X1 - X2                                                                  # (B, V, V, F)
        if self.bug == "einsum-diagonal":
            temp = torch.einsum("dd,bxcd->bxcd", self.A, diff)                          # (B, V, V, F)
        else:
            temp = torch.einsum("dk,bxck->bxcd", self.A, diff)                          # (B, V, V, F)
        dist = torch.einsum("bxcd,bxcd->bxc", temp, temp)                               # (B, V, V)
        exp_dist = 1 / (dist + 1e-10)
        n = exp_dist.shape[-1]
        off_diag = 1 - torch.eye(n)                                                     # (V, V)
        exp_dist = exp_dist * off_diag
        exp_max = exp_dist.max(dim=-1, keepdim=True)[0]                                 # (B, V, 1)
        p = exp_dist / exp_max
        return (p * off_diag + torch.eye(n)) * 0.99

    def forward(self, X):
        p = self.calculate_prob_distance(X)                                             # (B, V, V)
        return (p > 0.5).unsqueeze(1)                                                   # (B, 1, V, V)


class ChannelAttention(nn.Module):
    def __init__(self, seq_len, d_model, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.mask_generator = MahalanobisMask(seq_len, bug)
        self.embed = nn.Linear(seq_len, d_model)
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model) for _ in range(4))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, X):
        b, c, _ = X.shape
        mask = self.mask_generator(X)                                                   # (B, 1, V, V)
        x = self.embed(X)                                                               # (B, V, D)
        q = self.q_proj(x).view(b, c, self.n_heads, self.d_k).transpose(1, 2)           # (B, H, V, d)
        k = self.k_proj(x).view(b, c, self.n_heads, self.d_k).transpose(1, 2)           # (B, H, V, d)
        v = self.v_proj(x).view(b, c, self.n_heads, self.d_k).transpose(1, 2)           # (B, H, V, d)
        scores = q @ k.transpose(-2, -1) / self.d_k ** 0.5                              # (B, H, V, V)
        scores = scores.masked_fill(mask == 0, float("-inf"))
        out = scores.softmax(dim=-1) @ v                                                # (B, H, V, d)
        out = out.transpose(1, 2).reshape(b, c, -1)                                     # (B, V, D)
        return self.norm(x + self.out_proj(out))


def build(bug="", B=2, V=5, T=10, D=32, H=4):
    torch.manual_seed(0)
    return ChannelAttention(T, D, H, bug).eval(), (torch.randn(B, V, T),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

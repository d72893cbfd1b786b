"""MAZiqing/FEDformer, layers/FourierCorrelation.py and layers/AutoCorrelation.py (``FourierBlock``,
``AutoCorrelationLayer``; the 2022 release): FEDformer's frequency-enhanced block in place of self-attention: the
queries ``view(B, L, H, -1)``, ``permute(0, 2, 3, 1)`` to ``(B, H, E, L)``, ``torch.fft.rfft`` along time, a fixed
set of ``modes`` kept, each mode mixed across the head's channels by a complex weight ``(H, E, E, modes)``
(``einsum("bhi,hio->bho")`` per mode), ``irfft`` back to length ``L``; the layer's ``view(B, L, -1)`` and
``out_projection``. Keys and values are unused by the Fourier block (as upstream).

Bugs: ``out-view-without-permute``: the block's ``(B, H, E, L)`` result ``view(B, L, -1)``ed with no
``permute(0, 3, 1, 2)`` back to ``(B, L, H, E)`` (upstream's layer reads ``out.view(B, L, -1)`` of a block that
returns ``(B, H, E, L)``; the slip is reading the layout as time-major); ``rfft-over-channels``: ``rfft`` along
``dim=-2`` (each head's channels) instead of ``dim=-1`` (time); the kept modes then index channels (sizes allow it
where E ≥ modes)."""

import sys

import torch
from torch import nn


class FourierBlock(nn.Module):
    def __init__(self, in_channels, out_channels, seq_len, heads, modes=2, bug=""):
        super().__init__()
        self.index, self.bug = list(range(min(modes, seq_len // 2))), bug
        self.scale = 1 / (in_channels * out_channels)
        self.weights1 = nn.Parameter(self.scale * torch.rand(heads, in_channels // heads, out_channels // heads,
                                                            len(self.index), dtype=torch.cfloat))

    def compl_mul1d(self, input, weights):
        return torch.einsum("bhi,hio->bho", input, weights)

    def forward(self, q):
        B, L, H, E = q.shape
        x = q.permute(0, 2, 3, 1)
        fft_dim = -2 if self.bug == "rfft-over-channels" else -1
        x_ft = torch.fft.rfft(x, dim=fft_dim)
        if self.bug == "rfft-over-channels":
            x_ft = x_ft.transpose(-1, -2)
        out_ft = torch.zeros(B, H, E, L // 2 + 1, device=x.device, dtype=torch.cfloat)
        for wi, i in enumerate(self.index):
            out_ft[:, :, :, wi] = self.compl_mul1d(x_ft[:, :, :, i], self.weights1[:, :, :, wi])
        return torch.fft.irfft(out_ft, n=x.size(-1))


class FEDformerLayer(nn.Module):
    def __init__(self, d_model, n_heads, seq_len, bug=""):
        super().__init__()
        self.inner = FourierBlock(d_model, d_model, seq_len, n_heads, bug=bug)
        self.query_projection = nn.Linear(d_model, d_model)
        self.out_projection = nn.Linear(d_model, d_model)
        self.n_heads, self.bug = n_heads, bug

    def forward(self, queries):
        B, L, _ = queries.shape
        H = self.n_heads
        q = self.query_projection(queries).view(B, L, H, -1)
        out = self.inner(q)
        if self.bug != "out-view-without-permute":
            out = out.permute(0, 3, 1, 2).contiguous()
        return self.out_projection(out.reshape(B, L, -1))


class FEDformerEncoder(nn.Module):
    def __init__(self, c_in, d_model, n_heads, seq_len, bug=""):
        super().__init__()
        self.value_embedding = nn.Conv1d(c_in, d_model, kernel_size=3, padding=1, padding_mode="circular")
        self.layer, self.norm = FEDformerLayer(d_model, n_heads, seq_len, bug), nn.LayerNorm(d_model)
        self.ff1, self.ff2 = nn.Conv1d(d_model, 2 * d_model, 1), nn.Conv1d(2 * d_model, d_model, 1)

    def forward(self, x_enc):
        x = self.value_embedding(x_enc.permute(0, 2, 1)).transpose(1, 2)
        x = x + self.layer(x)
        y = self.ff2(torch.relu(self.ff1(x.transpose(-1, 1)))).transpose(-1, 1)
        return self.norm(x + y)


BUGS = ("out-view-without-permute", "rfft-over-channels")
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)
EQUAL = {"B=2 T=8 D=32 H=4": "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=8, D=32, H=4, C=7):
    torch.manual_seed(0)
    return FEDformerEncoder(C, D, H, T, bug=bug).eval(), (torch.randn(B, T, C),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

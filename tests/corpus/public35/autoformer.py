"""thuml/Autoformer, layers/AutoCorrelation.py and layers/Autoformer_EncDec.py (main, 2022, ``AutoCorrelation``
with ``time_delay_agg_inference``, ``AutoCorrelationLayer``, ``series_decomp``, ``EncoderLayer``): Autoformer's
auto-correlation in place of dot-product attention. q/k/v are ``Linear(D, D)`` viewed ``(B, L, H, -1)``; the
period correlations are ``irfft(rfft(q) * conj(rfft(k)), n=L)`` along time (q and k ``permute(0, 2, 3, 1)`` to
``(B, H, E, L)``); the ``top_k = int(factor · log L)`` delays of the correlation averaged over heads and channels
(``topk`` over time), their ``softmax``ed weights, and the values (``(B, H, E, L)``, repeated twice along time)
``gather``ed at each rolled delay and summed; ``permute(0, 3, 1, 2)`` back to ``(B, L, H, E)``, ``view(B, L, -1)``,
``out_projection``. Around it, ``series_decomp``: a moving average (``AvgPool1d`` over time, the ends replicated)
and the residual seasonal part.

Bugs: ``fft-over-channels``: q and k ``permute(0, 2, 1, 3)`` (``(B, H, L, E)``) before ``rfft(dim=-1)``: the
correlation taken across each head's channels, not across time (``irfft(n=L)`` still returns ``L`` entries, so
it runs); ``out-view-without-permute``: the aggregated values ``(B, H, E, L)`` ``view(B, L, -1)``ed without the
``permute(0, 3, 1, 2)`` (heads, channels and time mixed)."""

import math
import sys

import torch
from torch import nn


class AutoCorrelation(nn.Module):
    def __init__(self, factor=1, bug=""):
        super().__init__()
        self.factor, self.bug = factor, bug

    def time_delay_agg_inference(self, values, corr):
        batch, head, channel, length = values.shape
        init_index = torch.arange(length).unsqueeze(0).unsqueeze(0).unsqueeze(0).repeat(batch, head, channel, 1)
        top_k = int(self.factor * math.log(length))
        mean_value = torch.mean(torch.mean(corr, dim=1), dim=1)
        weights, delay = torch.topk(mean_value, top_k, dim=-1)
        tmp_corr = torch.softmax(weights, dim=-1)
        tmp_values = values.repeat(1, 1, 1, 2)
        delays_agg = torch.zeros_like(values).float()
        for i in range(top_k):
            tmp_delay = init_index + delay[:, i].unsqueeze(1).unsqueeze(1).unsqueeze(1).repeat(1, head, channel, length)
            pattern = torch.gather(tmp_values, dim=-1, index=tmp_delay)
            delays_agg = delays_agg + pattern * (
                tmp_corr[:, i].unsqueeze(1).unsqueeze(1).unsqueeze(1).repeat(1, head, channel, length))
        return delays_agg

    def forward(self, queries, keys, values):
        B, L, H, E = queries.shape
        if self.bug == "fft-over-channels":
            q_fft = torch.fft.rfft(queries.permute(0, 2, 1, 3).contiguous(), dim=-1)
            k_fft = torch.fft.rfft(keys.permute(0, 2, 1, 3).contiguous(), dim=-1)
        else:
            q_fft = torch.fft.rfft(queries.permute(0, 2, 3, 1).contiguous(), dim=-1)
            k_fft = torch.fft.rfft(keys.permute(0, 2, 3, 1).contiguous(), dim=-1)
        res = q_fft * torch.conj(k_fft)
        corr = torch.fft.irfft(res, n=L, dim=-1)
        V = self.time_delay_agg_inference(values.permute(0, 2, 3, 1).contiguous(), corr)
        if self.bug != "out-view-without-permute":
            V = V.permute(0, 3, 1, 2)
        return V.contiguous()


class AutoCorrelationLayer(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.inner_correlation, self.n_heads = AutoCorrelation(bug=bug), n_heads
        self.query_projection, self.key_projection = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.value_projection, self.out_projection = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, queries, keys, values):
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads
        queries = self.query_projection(queries).view(B, L, H, -1)
        keys = self.key_projection(keys).view(B, S, H, -1)
        values = self.value_projection(values).view(B, S, H, -1)
        out = self.inner_correlation(queries, keys, values)
        out = out.view(B, L, -1)
        return self.out_projection(out)


class moving_avg(nn.Module):
    def __init__(self, kernel_size, stride):
        super().__init__()
        self.kernel_size = kernel_size
        self.avg = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=0)

    def forward(self, x):
        front = x[:, 0:1, :].repeat(1, (self.kernel_size - 1) // 2, 1)
        end = x[:, -1:, :].repeat(1, (self.kernel_size - 1) // 2, 1)
        x = torch.cat([front, x, end], dim=1)
        x = self.avg(x.permute(0, 2, 1))
        return x.permute(0, 2, 1)


class series_decomp(nn.Module):
    def __init__(self, kernel_size):
        super().__init__()
        self.moving_avg = moving_avg(kernel_size, stride=1)

    def forward(self, x):
        moving_mean = self.moving_avg(x)
        return x - moving_mean, moving_mean


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, moving_avg=5, bug=""):
        super().__init__()
        self.attention = AutoCorrelationLayer(d_model, n_heads, bug)
        self.conv1 = nn.Conv1d(d_model, 2 * d_model, kernel_size=1, bias=False)
        self.conv2 = nn.Conv1d(2 * d_model, d_model, kernel_size=1, bias=False)
        self.decomp1, self.decomp2 = series_decomp(moving_avg), series_decomp(moving_avg)

    def forward(self, x):
        x = x + self.attention(x, x, x)
        x, _ = self.decomp1(x)
        y = nn.functional.gelu(self.conv1(x.transpose(-1, 1)))
        y = self.conv2(y).transpose(-1, 1)
        res, _ = self.decomp2(x + y)
        return res


class Encoder(nn.Module):
    def __init__(self, c_in, d_model, n_heads, bug=""):
        super().__init__()
        self.value_embedding = nn.Conv1d(c_in, d_model, kernel_size=3, padding=1, padding_mode="circular", bias=False)
        self.attn_layers = nn.ModuleList([EncoderLayer(d_model, n_heads, bug=bug) for _ in range(2)])
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x_enc):
        x = self.value_embedding(x_enc.permute(0, 2, 1)).transpose(1, 2)
        for layer in self.attn_layers:
            x = layer(x)
        return self.norm(x)


BUGS = ("fft-over-channels", "out-view-without-permute")
TWINS = ()
DIMS = ("B=2 T=12 D=32 H=4",)


def build(bug="", B=2, T=12, D=32, H=4):
    torch.manual_seed(0)
    x_enc = torch.randn(B, T, 7)                                             # 7 variates, the ETT sets' width
    return Encoder(7, D, H, bug).eval(), (x_enc,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

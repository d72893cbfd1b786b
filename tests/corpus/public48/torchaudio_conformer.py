"""pytorch/audio, src/torchaudio/models/conformer.py (``Conformer``, ``ConformerLayer``, ``_ConvolutionModule``,
``_FeedForwardModule``, ``_lengths_to_padding_mask``), main (a94dcd1): the batch-first input ``(B, T, D)``
turned time-major by ``input.transpose(0, 1)`` for ``torch.nn.MultiheadAttention`` (``batch_first=False``) with
a key padding mask ``arange(max_length).expand(B, max_length) >= lengths.unsqueeze(1)``; each layer: half-step
macaron FFN, pre-norm self-attention, then the convolution module, which wants batch-first again:
``_apply_convolution`` does ``input.transpose(0, 1)``, the module's ``layer_norm`` and ``x.transpose(1, 2)``
(``(B, D, T)`` for ``Conv1d``), pointwise ``Conv1d(D, 2D, 1)``, ``GLU(dim=1)``, a depthwise ``Conv1d`` over
time (``groups=D``), ``BatchNorm1d``, SiLU, pointwise ``Conv1d``, ``transpose(1, 2)``, and back to time-major;
the second half-step FFN, ``final_layer_norm``; the output transposed back to ``(B, T, D)``.

Bugs: ``conv-over-batch``: ``_apply_convolution`` hands the time-major ``(T, B, D)`` straight to the convolution
module (the ``transpose(0, 1)`` pair left out): its ``transpose(1, 2)`` makes ``(T, D, B)`` and the depthwise
convolution slides along the batch (utterances mixed, frames never convolved). Twin: ``convolution-first``:
``convolution_first=True`` (the module's own option: the convolution module before the attention)."""

import sys

import torch


def _lengths_to_padding_mask(lengths):
    batch_size = lengths.shape[0]
    max_length = int(torch.max(lengths).item())
    return torch.arange(max_length, dtype=lengths.dtype).expand(batch_size, max_length) >= lengths.unsqueeze(1)


class _ConvolutionModule(torch.nn.Module):
    def __init__(self, input_dim, num_channels, depthwise_kernel_size):
        super().__init__()
        self.layer_norm = torch.nn.LayerNorm(input_dim)
        self.sequential = torch.nn.Sequential(
            torch.nn.Conv1d(input_dim, 2 * num_channels, 1),
            torch.nn.GLU(dim=1),
            torch.nn.Conv1d(num_channels, num_channels, depthwise_kernel_size,
                            padding=(depthwise_kernel_size - 1) // 2, groups=num_channels),
            torch.nn.BatchNorm1d(num_channels),
            torch.nn.SiLU(),
            torch.nn.Conv1d(num_channels, input_dim, kernel_size=1),
        )

    def forward(self, input):
        x = self.layer_norm(input)                                                     # (B, T, D)
        x = x.transpose(1, 2)                                                          # (B, D, T)
        x = self.sequential(x)                                                         # (B, D, T)
        return x.transpose(1, 2)                                                       # (B, T, D)


class _FeedForwardModule(torch.nn.Module):
    def __init__(self, input_dim, hidden_dim):
        super().__init__()
        self.sequential = torch.nn.Sequential(
            torch.nn.LayerNorm(input_dim), torch.nn.Linear(input_dim, hidden_dim), torch.nn.SiLU(),
            torch.nn.Linear(hidden_dim, input_dim))

    def forward(self, input):
        return self.sequential(input)


class ConformerLayer(torch.nn.Module):
    def __init__(self, input_dim, ffn_dim, num_attention_heads, depthwise_conv_kernel_size, bug=""):
        super().__init__()
        self.bug = bug
        self.ffn1 = _FeedForwardModule(input_dim, ffn_dim)
        self.self_attn_layer_norm = torch.nn.LayerNorm(input_dim)
        self.self_attn = torch.nn.MultiheadAttention(input_dim, num_attention_heads)
        self.conv_module = _ConvolutionModule(input_dim, input_dim, depthwise_conv_kernel_size)
        self.ffn2 = _FeedForwardModule(input_dim, ffn_dim)
        self.final_layer_norm = torch.nn.LayerNorm(input_dim)
        self.convolution_first = bug == "convolution-first"

    def _apply_convolution(self, input):
        residual = input                                                               # (T, B, D)
        if self.bug == "conv-over-batch":
            input = self.conv_module(input)                                            # (T, B, D)
        else:
            input = input.transpose(0, 1)                                              # (B, T, D)
            input = self.conv_module(input)                                            # (B, T, D)
            input = input.transpose(0, 1)                                              # (T, B, D)
        return residual + input

    def forward(self, input, key_padding_mask):
        residual = input
        x = self.ffn1(input)
        x = x * 0.5 + residual                                                         # (T, B, D)
        if self.convolution_first:
            x = self._apply_convolution(x)
        residual = x
        x = self.self_attn_layer_norm(x)
        x, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=key_padding_mask, need_weights=False)
        x = x + residual                                                               # (T, B, D)
        if not self.convolution_first:
            x = self._apply_convolution(x)
        residual = x
        x = self.ffn2(x)
        x = x * 0.5 + residual
        return self.final_layer_norm(x)                                                # (T, B, D)


class Conformer(torch.nn.Module):
    def __init__(self, input_dim, num_heads, ffn_dim, num_layers, depthwise_conv_kernel_size, bug=""):
        super().__init__()
        self.conformer_layers = torch.nn.ModuleList(
            ConformerLayer(input_dim, ffn_dim, num_heads, depthwise_conv_kernel_size, bug)
            for _ in range(num_layers))

    def forward(self, input, lengths):
        encoder_padding_mask = _lengths_to_padding_mask(lengths)                      # (B, T)
        x = input.transpose(0, 1)                                                      # (T, B, D)
        for layer in self.conformer_layers:
            x = layer(x, encoder_padding_mask)
        return x.transpose(0, 1), lengths                                              # (B, T, D)


BUGS = ("conv-over-batch",)
TWINS = ("convolution-first",)
DIMS = ("B=2 T=7 D=32 H=4",)


def build(bug="", B=2, T=7, D=32, H=4):
    """Filterbank-like frames already at width ``D``; the longest utterance fills ``T`` (the mask's width is
    ``max(lengths)``, as torchaudio's is)."""
    torch.manual_seed(0)
    model = Conformer(D, H, 2 * D, 2, 3, bug=bug).eval()
    lengths = torch.tensor([T - (i % 3) for i in range(B)])
    return model, (torch.randn(B, T, D), lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)

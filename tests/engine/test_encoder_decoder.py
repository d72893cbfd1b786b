"""An encoder-decoder written with torch alone, in T5's style (modules q, k, v, o; the encoder runs
before the decoder): which token axis is ``T`` and which ``S`` when both lengths are equal, and no
false alarm on cross-attention whose queries come from the sequence that entered second."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace


class Attention(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads, self.d_k = heads, d_model // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model, bias=False) for _ in range(4))

    def split(self, x: torch.Tensor) -> torch.Tensor:
        B, L, _ = x.shape
        return x.view(B, L, self.heads, self.d_k).transpose(1, 2)           # (B, H, L, d_k)

    def forward(self, x: torch.Tensor, source: torch.Tensor | None = None) -> torch.Tensor:
        source = x if source is None else source
        q, k, v = self.split(self.q(x)), self.split(self.k(source)), self.split(self.v(source))
        scores = q @ k.transpose(-2, -1) / self.d_k ** 0.5                  # (B, H, L, L_source)
        out = scores.softmax(dim=-1) @ v                                    # (B, H, L, d_k)
        B, _, L, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(B, L, -1))               # (B, L, D)


class EncoderDecoder(nn.Module):
    def __init__(self, vocab: int = 50, d_model: int = 32, heads: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.encoder = Attention(d_model, heads)
        self.decoder = Attention(d_model, heads)
        self.cross = Attention(d_model, heads)

    def forward(self, source_ids: torch.Tensor, target_ids: torch.Tensor) -> torch.Tensor:
        memory = self.encoder(self.embed(source_ids))                       # (B, S, D)
        x = self.decoder(self.embed(target_ids))                            # (B, T, D)
        return self.cross(x, memory)                                        # (B, T, D)


def scores_of(trace, module: str) -> tuple:
    (scores,) = [e for e in trace.events if e.op == "matmul" and e.module == module and e.projections[:2] == ("q", "k")]
    return scores.output.dims


@pytest.mark.parametrize("lengths", [(6, 6), (7, 5)], ids=["equal lengths", "different lengths"])
def test_the_decoder_queries_T_and_the_encoder_is_S(lengths):
    torch.manual_seed(0)
    model = EncoderDecoder().eval()
    source, target = lengths
    with torch.no_grad(), shapetrace.trace(dims={"B": 2, "S": source, "T": target, "D": 32, "H": 4}) as t:
        model(torch.randint(0, 50, (2, source)), torch.randint(0, 50, (2, target)))
    assert scores_of(t, "encoder") == ("B", "H", "S", "S")
    assert scores_of(t, "decoder") == ("B", "H", "T", "T")
    assert scores_of(t, "cross") == ("B", "H", "T", "S")
    assert [e.output.dims for e in t.events if e.op == "embedding"] == [("B", "S", "D"), ("B", "T", "D")]
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == []


def test_token_ids_of_a_second_sequence_are_S_even_with_the_length_of_T():
    first, second = torch.zeros(2, 6, dtype=torch.long), torch.ones(2, 6, dtype=torch.long)
    embed = nn.Embedding(4, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 S=6 D=32 H=4") as t:
        embed(first)
        embed(second)
    assert [e.inputs[0].dims for e in t.events] == [("B", "T"), ("B", "S")]
    assert [e.output.dims for e in t.events] == [("B", "T", "D"), ("B", "S", "D")]


def test_keys_really_first_is_still_an_error_with_equal_lengths():
    torch.manual_seed(0)
    model = EncoderDecoder().eval()

    def swapped(self, x, source=None):
        source = x if source is None else source
        q, k = self.split(self.q(x)), self.split(self.k(source))
        return (k @ q.transpose(-2, -1)).softmax(dim=-1)                    # (B, H, L_source, L): keys first

    model.cross.forward = swapped.__get__(model.cross)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 S=6 D=32 H=4") as t:
        model(torch.randint(0, 50, (2, 6)), torch.randint(0, 50, (2, 6)))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["query-key-swapped"]

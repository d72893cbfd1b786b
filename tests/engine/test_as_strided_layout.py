"""``as_strided`` addresses memory, so where each element came from depends on how its operand lies in memory.

transformers' Longformer and LED (``LongformerSelfAttention._chunk``, ``LEDEncoderSelfAttention._chunk``) fold the
heads into the batch with ``query.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)`` from
sequence-first projections, which torch returns as a view whose folded axis steps by ``d_k`` in memory, and then cut
overlapping windows with ``as_strided(size=chunk_size, stride=chunk_stride)`` from that view's own strides. The
element-provenance pass replayed the call on a contiguous coordinate tensor, where a step of ``d_k`` is a step along
the tokens: the folded heads were named ``T+506%8`` (a piece of the padded tokens), and LED's encoder ended with a
false ``✗ broadcast-mismatch`` (its ``attn_probs`` read as tokens on the batch axis). Now the coordinates are laid
out in memory as the operand was (shapetrace/engine/provenance.py ``laid_out``). The last two tests fail on 1890185;
the first guards the whole path (on 1890185 it passes: the registry's own rule names that fold from the strides, and
the replay only fills axes the rule left unnamed, as LED's first inference walk left it); LED itself is traced in
tests/engine/test_libraries.py.
"""

from __future__ import annotations

import torch

import shapetrace


def _chunk(hidden_states, window_overlap):
    """transformers' ``LongformerSelfAttention._chunk`` (its non-ONNX branch)."""
    hidden_states = hidden_states.view(hidden_states.size(0), torch.div(hidden_states.size(1), window_overlap * 2,
                                                                        rounding_mode="trunc"),
                                       window_overlap * 2, hidden_states.size(2))          # (B·H, n, 2w, d_k)
    chunk_size = list(hidden_states.size())
    chunk_size[1] = chunk_size[1] * 2 - 1
    chunk_stride = list(hidden_states.stride())
    chunk_stride[1] = chunk_stride[1] // 2
    return hidden_states.as_strided(size=chunk_size, stride=chunk_stride)                 # (B·H, 2n-1, 2w, d_k)


def _labels(event):
    return tuple(event.outputs[0].dims)


def test_windows_cut_from_heads_folded_into_the_batch_keep_the_fold():
    B, T, H, d = 2, 16, 4, 8
    x = torch.randn(T, B, H * d)                                                         # (T, B, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        q = x.view(T, B, H, d).transpose(0, 1)                                           # (B, T, H, d_k)
        folded = q.transpose(1, 2).reshape(B * H, T, d)                                  # (B·H, T, d_k), a view
        _chunk(folded, 2)
    assert folded.stride() == (d, B * H * d, 1)   # (the fold steps by d_k in memory: a view, not a copy)
    strided = next(e for e in t.events if e.op == "as_strided")
    assert _labels(strided)[0] == "B*H" and _labels(strided)[3] == "d_k"


def test_coordinates_laid_out_as_the_operand_read_back_by_its_own_strides():
    from shapetrace.engine.provenance import laid_out  # (here: 1890185 has none)

    x = torch.arange(24.0).reshape(2, 3, 4).transpose(0, 2)                              # (4, 3, 2), strides (1, 4, 12)
    coords = torch.arange(1.0, 25.0).reshape(4, 3, 2)
    placed = laid_out(coords, (x.stride(), x.storage_offset()))
    assert placed.stride() == x.stride() and torch.equal(placed, coords)
    assert torch.equal(torch.as_strided(placed, (4, 3, 2), x.stride()), coords)
    assert laid_out(coords, ((0, 4, 12), 0)) is coords   # (a layout that overlaps itself stays contiguous)


def test_an_as_strided_replay_walks_the_operands_axes_as_they_lie_in_memory():
    """An identity ``as_strided`` of a permuted operand: each output axis walks the same operand axis (digit strides
    count the operand's elements in index order: 128, 8, 1). On 1890185 the first walked 8, a piece of axis 1."""
    from shapetrace.engine.provenance import Data, sources

    x = torch.randn(16, 8, 8).permute(1, 0, 2)                                         # (8, 16, 8), strides (8, 64, 1)
    found = sources(torch.as_strided, (Data((8, 16, 8), (x.stride(), 0)), (8, 16, 8), x.stride()), {})
    assert [[(w[0], [(d.stride, d.size) for d in w[1]]) for w in a.walks] for a in found[0]] == [
        [(0, [(128, 8)])], [(0, [(8, 16)])], [(0, [(1, 8)])]]

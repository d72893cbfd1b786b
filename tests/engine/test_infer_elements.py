"""engine/infer/elements.py: names from element provenance in traced code written in the styles of public code.

Each case names an axis that the engine before this pass left unnamed or misnamed (noted per test);
the sizes include B = T = H = 4, where no size can tell two axes apart."""

import pytest
import torch

import shapetrace
from shapetrace.engine.infer.elements import callable_of
from shapetrace.engine.ops import REGISTRY

SIZES = ["B=2 T=8 D=16 H=4", "B=4 T=4 D=16 H=4"]


def dims_of(t, op):
    return [e.output.dims for e in t.events if e.op == op]


def sizes(dims: str) -> dict[str, int]:
    return {k: int(v) for k, v in (p.split("=") for p in dims.split())}


@pytest.mark.parametrize("dims", SIZES)
def test_mae_random_masking_keeps_tokens_selected_by_ids_keep(dims):
    """facebookresearch/mae, models_mae.py ``random_masking``: argsort of noise, keep the first
    ``len_keep``, ``torch.gather(x, dim=1, index=ids_keep.unsqueeze(-1).repeat(1, 1, D))``.
    Before: ``[B, None, D]``."""
    n = sizes(dims)
    x = torch.randn(n["B"], n["T"], n["D"])                        # (B, T, D)
    with shapetrace.trace(dims=dims) as t:
        noise = torch.rand(n["B"], n["T"])                        # (B, T)
        ids_shuffle = torch.argsort(noise, dim=1)
        ids_keep = ids_shuffle[:, :n["T"] // 2]                   # (B, T/2)
        kept = torch.gather(x, dim=1, index=ids_keep.unsqueeze(-1).repeat(1, 1, n["D"]))   # (B, T[ids_keep], D)
    assert kept.shape == (n["B"], n["T"] // 2, n["D"])
    assert dims_of(t, "gather") == [("B", "T[ids_keep]", "D")]


def test_paged_attention_block_table_gather_selects_blocks():
    """vLLM-style paged KV cache: ``key_cache[block_tables]`` reads each sequence's blocks,
    ``[num_blocks, block_size, H, d_k]`` -> ``[B, max_blocks, block_size, H, d_k]``.
    Before: the two table axes were unnamed. The two axes the table makes take the table's own names
    (``B``, ``M``); unnamed, they stay unnamed: on 90e1ad1 both were ``blocks[block_tables]``,
    which called the table's batch axis a block axis (the same rule named Megatron's ``emb[position_ids]``,
    ``(B, T)`` positions, ``T[position_ids]`` twice: tokens where the batch is; tests/corpus/reports4)."""
    block_tables = torch.randint(0, 9, (2, 3))                                # (B, max_blocks)
    with shapetrace.trace(dims="B=2 T=12 D=32 H=4 M=3") as t:
        key_cache = shapetrace.name(torch.randn(9, 4, 4, 8), "blocks L H d_k")   # (blocks, L, H, d_k)
        keys = key_cache[block_tables]                                        # (B, max_blocks, L, H, d_k)
    with shapetrace.trace(dims="B=2 T=12 D=32 H=4 M=3") as named:
        key_cache = shapetrace.name(torch.randn(9, 4, 4, 8), "blocks L H d_k")
        key_cache[shapetrace.name(block_tables, "B M")]
    assert keys.shape == (2, 3, 4, 4, 8)
    assert dims_of(t, "__getitem__") == [(None, None, "L", "H", "d_k")]
    assert dims_of(named, "__getitem__") == [("B", "M", "L", "H", "d_k")]


def test_positions_of_a_batch_into_a_token_table_keep_the_positions_names():
    """NVIDIA/Megatron-LM issue #453's fix: ``emb[position_ids]``, a ``(T, d)`` rotary table read at
    ``(B, T)`` positions, is ``(B, T, d)``: the first axis is the positions' batch, not tokens. Fails on
    90e1ad1: ``(T[position_ids], T[position_ids], None)``, and the rotation's ``mul`` against ``(T, B, H,
    d_k)`` queries was a false ``broadcast-mismatch`` (tokens against batch)."""
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        position_ids = shapetrace.name(torch.arange(6).expand(2, 6), "B T")
        emb = shapetrace.name(torch.randn(6, 8), "T d_k")
        freqs = emb[position_ids]
    assert freqs.shape == (2, 6, 8)
    assert dims_of(t, "__getitem__") == [("B", "T", "d_k")]


@pytest.mark.parametrize("dims", SIZES)
def test_head_major_cat_of_split_folds_heads_over_batch(dims):
    """Kyubyong/transformer (and its PyTorch ports): ``Q_ = torch.cat(torch.split(Q, d_k, dim=2), dim=0)``,
    ``(H·N, T, d_k)`` with the heads major. Before: ``B+B+B+B`` (a join of batch with itself)."""
    n = sizes(dims)
    d_k = n["D"] // n["H"]
    q = torch.randn(n["B"], n["T"], n["D"])                                    # (B, T, D)
    with shapetrace.trace(dims=dims) as t:
        q_ = torch.cat(torch.split(q, d_k, dim=2), dim=0)                     # (H*B, T, d_k)
    assert q_.shape == (n["H"] * n["B"], n["T"], d_k)
    assert dims_of(t, "cat") == [("H*B", "T", "d_k")]


@pytest.mark.parametrize("dims", SIZES)
def test_take_along_dim_of_topk_tokens(dims):
    """Token pruning in the style of DynamicViT/EViT: scores per token, ``topk`` indices, and
    ``torch.take_along_dim(x, idx.unsqueeze(-1), dim=1)`` keeps those tokens.
    Before: take_along_dim was an unknown op (no row, no names)."""
    n = sizes(dims)
    x = torch.randn(n["B"], n["T"], n["D"])                                   # (B, T, D)
    with shapetrace.trace(dims=dims) as t:
        keep = x.norm(dim=-1).topk(2, dim=1).indices                          # (B, 2)
        kept = torch.take_along_dim(x, keep.unsqueeze(-1), dim=1)             # (B, T[keep], D)
    assert kept.shape == (n["B"], 2, n["D"])
    assert dims_of(t, "take_along_dim") == [("B", "T[keep]", "D")]


def test_index_select_on_the_cache_time_axis_keeps_the_time_name():
    """A KV cache read back at chosen positions with ``index_select`` on its time axis (as in
    fairseq's incremental-state reorder, here on time): ``[B, H, T, d_k]`` -> ``[B, H, T[positions], d_k]``.
    Before: ``[B, H, None, d_k]``."""
    k = torch.randn(2, 4, 6, 8)                                               # (B, H, T, d_k)
    positions = torch.tensor([0, 3, 5])
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        picked = k.index_select(2, positions)                                  # (B, H, T[positions], d_k)
    assert picked.shape == (2, 4, 3, 8)
    assert dims_of(t, "index_select") == [("B", "H", "T[positions]", "d_k")]


def test_a_boolean_mask_selects_by_value_and_stays_unnamed():
    """``x[mask]`` keeps as many rows as the mask holds: nothing proves which axis that is, even when
    that count happens to equal T (before: named ``T`` whenever 8 of the 16 entries were kept)."""
    x = torch.randn(2, 8, 16)                                                  # (B, T, D)
    mask = torch.zeros(2, 8, dtype=torch.bool)
    mask[0, :5] = mask[1, :3] = True                                           # 8 kept: the size of T
    first = mask[0]
    with shapetrace.trace(dims="B=2 T=8 D=16 H=4") as t:
        rows = x[mask]                                                         # (kept, D)
        cols = x[:, first]                                                     # (B, kept, D)
    assert rows.shape == (8, 16) and cols.shape == (2, 5, 16)
    assert dims_of(t, "__getitem__") == [(None, "D"), ("B", None, "D")]


def test_an_index_over_two_axes_at_once_is_not_named():
    """``h[torch.arange(B), last]`` (transformers' GPT2ForSequenceClassification pooling) selects along
    batch and tokens together: one output axis, two sources, no single name proven."""
    h = torch.randn(4, 4, 16)
    with shapetrace.trace(dims="B=4 T=4 D=16 H=4") as t:
        pooled = h[torch.arange(4), torch.tensor([3, 1, 2, 0])]
    assert dims_of(t, "__getitem__") == [(None, "D")]
    assert pooled.shape == (4, 16)


@pytest.mark.parametrize("dims", SIZES)
def test_a_pick_along_two_axes_takes_the_batch_name_both_indices_give(dims):
    """transformers' GPT2ForSequenceClassification (v4.20): ``sequence_lengths = torch.ne(input_ids,
    pad).sum(-1) - 1`` and ``logits[torch.arange(batch_size), sequence_lengths]``; CLIP's text pooling
    ``hidden[torch.arange(hidden.shape[0]), input_ids.argmax(-1)]``. Both indices run along B, so the
    picked axis is B's positions. 742b81f: ``[None, D]`` (two sources, no name)."""
    n = sizes(dims)
    ids, h = torch.randint(1, 9, (n["B"], n["T"])), torch.randn(n["B"], n["T"], n["D"])
    with shapetrace.trace(dims=dims) as t:
        shapetrace.name(ids, "B T")
        shapetrace.name(h, "B T D")
        last = torch.ne(ids, 0).sum(-1) - 1                                    # (B,)
        pooled = h[torch.arange(h.shape[0]), last]                             # (B, D)
        eot = h[torch.arange(h.shape[0]), ids.argmax(dim=-1)]                  # (B, D)
    assert pooled.shape == eot.shape == (n["B"], n["D"])
    assert dims_of(t, "__getitem__") == [("B", "D"), ("B", "D")]


def test_a_pick_whose_indices_run_along_different_axes_is_not_named():
    """The twin: ``h[arange(B), arange(T)]`` at B = T = 4 (a diagonal): one index runs along B, the other
    along T, and the picked axis is neither alone."""
    h = torch.randn(4, 4, 16)
    with shapetrace.trace(dims="B=4 T=4 D=16 H=4") as t:
        shapetrace.name(h, "B T D")
        diagonal = h[torch.arange(h.shape[0]), torch.arange(h.shape[1])]       # (4, D)
    assert diagonal.shape == (4, 16)
    assert dims_of(t, "__getitem__") == [(None, "D")]


def test_ops_are_replayed_as_the_callable_the_registry_names():
    assert callable_of(REGISTRY["unfold"].replay) is torch.Tensor.unfold   # windows, not F.unfold's im2col
    assert callable_of(REGISTRY["pad"].replay) is torch.nn.functional.pad
    assert callable_of(REGISTRY["cat"].replay) is torch.cat
    assert callable_of(REGISTRY["__getitem__"].replay) is torch.Tensor.__getitem__
    assert REGISTRY["matmul"].replay == "" and callable_of("") is None     # computes: never replayed


def test_a_roll_too_large_to_read_keeps_the_registrys_words():
    """A roll's shift is read from its replay only up to ``ROLL_READ_MAX`` elements (reading costs about a
    second per 65,536 on a loaded CPU); above it the row says only what the registry says, which is true."""
    from shapetrace.engine.infer.elements import ROLL_READ_MAX
    from shapetrace.engine.sentences import annotate
    small, large = torch.randn(2, 6, 6, 4), torch.randn(1, 64, 64, ROLL_READ_MAX // 4096 + 1)
    with shapetrace.trace() as t:
        torch.roll(small, shifts=(-1, -1), dims=(1, 2))
        torch.roll(large, shifts=(-1, -1), dims=(1, 2))
    read, unread = t.events
    assert read.params["rolled"] == {1: -1, 2: -1}
    assert "rolled" not in unread.params
    assert annotate(unread).startswith("rotates the values along axes (same names, shifted positions)")


def test_an_index_select_whose_dim_is_a_variable_names_the_index_not_the_dim():
    """``x.index_select(axis, beam_idx)`` (a beam search's cache reorder, PaddleNLP issue #6672's loop): the
    index is the tensor argument; on 48779ab the label took the first name on the line, the dim's
    variable (``B[axis]``), so the cache and the step reordered by one index joined under two labels and the
    join lost its batch name (tests/corpus/reports3/chatglm_beam_reorder.py)."""
    cache, step = torch.randn(6, 2, 16), torch.randn(1, 2, 16)
    beam_idx = torch.tensor([1, 0])
    axis = 1
    with shapetrace.trace(dims="B=2 T=6 D=16 H=4") as t:
        shapetrace.name(cache, "T B D")
        shapetrace.name(step, "_ B D")
        kept = cache.index_select(axis, beam_idx)
        torch.cat([kept, step.index_select(1, beam_idx)], dim=0)
    assert dims_of(t, "index_select") == [("T", "B[beam_idx]", "D"), (None, "B[beam_idx]", "D")]
    assert dims_of(t, "cat") == [("T+1", "B[beam_idx]", "D")]


@pytest.mark.parametrize("dims", SIZES)
def test_a_pick_along_several_axes_takes_the_name_of_the_one_index_that_names_it(dims):
    """zhouhaoyi/Informer2020 models/attn.py ``_prob_QK``: ``Q[torch.arange(B)[:, None, None], torch.arange(H)[None,
    :, None], M_top, :]`` with ``M_top`` from ``topk`` (no names). The first two output axes pick along B (and T)
    and along H (and T): the arange names each, and ``M_top``, broadcast with it there, is that same axis.
    On 4212b85: ``(None, None, T[M_top], d_k)`` (every index had to name it)."""
    n = sizes(dims)
    q = torch.randn(n["B"], n["H"], n["T"], n["D"] // n["H"])                            # (B, H, T, d_k)
    with shapetrace.trace(dims=dims) as t:
        shapetrace.name(q, "B H T d_k")
        B, H, L, _ = q.shape
        M_top = q.sum(-1).topk(2, sorted=False)[1]                                        # (B, H, 2)
        reduced = q[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None], M_top, :]   # (B, H, T[M_top], d_k)
    assert reduced.shape == (n["B"], n["H"], 2, n["D"] // n["H"])
    assert dims_of(t, "__getitem__")[-1] == ("B", "H", "T[M_top]", "d_k")


@pytest.mark.parametrize("dims", SIZES)
def test_a_pick_along_an_expanded_axis_picks_copies_and_is_not_named(dims):
    """Informer's ``K_expand = K.unsqueeze(-3).expand(B, H, L_Q, L_K, E)`` sampled by ``K_expand[:, :,
    arange(L_Q).unsqueeze(1), index_sample, :]``: the sample picks keys, ``T[index_sample]``. With the two
    indices traded (``K_expand[:, :, index_sample, arange(L_Q).unsqueeze(1), :]``) the sample picks along the
    expanded axis, copies of one key: that axis is no pick of tokens, so it has no name. On 4212b85 the traded
    pick was named ``T[index_sample]`` too (and the whole Informer file with it got ✓)."""
    n = sizes(dims)
    k = torch.randn(n["B"], n["H"], n["T"], n["D"] // n["H"])                            # (B, H, T, d_k)
    with shapetrace.trace(dims=dims) as t:
        shapetrace.name(k, "B H T d_k")
        B, H, L, E = k.shape
        K_expand = k.unsqueeze(-3).expand(B, H, L, L, E)                                  # (B, H, T, T, d_k)
        index_sample = torch.randint(L, (L, 3))                                           # (T, 3)
        keys = K_expand[:, :, torch.arange(L).unsqueeze(1), index_sample, :]              # (B, H, T, T[...], d_k)
        copies = K_expand[:, :, index_sample, torch.arange(L).unsqueeze(1), :]            # (B, H, T, 3 copies, d_k)
    assert keys.shape == copies.shape == (n["B"], n["H"], n["T"], 3, n["D"] // n["H"])
    assert dims_of(t, "__getitem__")[-2:] == [("B", "H", "T", "T[index_sample]", "d_k"), ("B", "H", "T", None, "d_k")]


def test_every_inference_of_one_run_replays_each_call_once(monkeypatch):
    """A replay on coordinates is a function of the call alone (its function, its recorded arguments, its
    operands' shapes), never of names, so every inference of one run shares it: each reading of equal
    sizes (B = T = H = 4 reads the capture several ways), the walk again with pins, and the same call in
    the next layer. Two layers of nanoGPT-style head split written with ``torch.cat(x.split(...))`` and a
    MAE-style ``gather`` of kept tokens. On eea3781 the same calls were replayed once per inference
    (11,548 replays asked over tests/corpus for 1,938 distinct calls): here each distinct call once."""
    from shapetrace.engine.infer import elements

    asked: list[tuple] = []
    real = elements.sources

    def counted(fn, args, kwargs=None):
        asked.append((fn, repr(args), repr(kwargs)))
        return real(fn, args, kwargs)

    monkeypatch.setattr(elements, "sources", counted)
    x = torch.randn(4, 4, 16)                                              # (B, T, D)
    keep = torch.argsort(torch.rand(4, 4), dim=1)[:, :2]                   # (B, T/2)
    with shapetrace.trace(dims="B=4 T=4 D=16 H=4") as t:
        for _ in range(2):                                                 # two layers: the same calls
            heads = torch.cat(x.split(4, dim=-1), dim=0)                   # ((H·B), T, d_k)
            kept = torch.gather(x, 1, keep.unsqueeze(-1).expand(4, 2, 16))   # (B, T[keep], D)
    t.report()
    assert heads.shape == (16, 4, 4) and kept.shape == (4, 2, 16)
    assert asked and len(asked) == len(set(asked)), f"{len(asked)} replays for {len(set(asked))} calls"
    assert dims_of(t, "cat") == [("H*B", "T", "d_k")] * 2   # (the names the replays give, as before)
    assert dims_of(t, "gather") == [("B", "T[keep]", "D")] * 2


def test_a_flip_spelled_as_a_method_is_read_as_a_reversal():
    """``x.flip(1)`` (an int, which ``torch.flip`` refuses) is replayed as the method: the row notes the axis
    it reverses (failing on 01f2f59: the replay raised and the row noted nothing)."""
    x = torch.randn(2, 6, 4)
    with shapetrace.trace(dims="B=2 T=6 D=4") as t:
        shapetrace.name(x, "B T D")
        x.flip(1)
        torch.flip(x, [0, 2])
        torch.roll(x, 1, 1)
    assert [(e.op, e.params.get("reversed")) for e in t.events] == [("flip", (1,)), ("flip", (0, 2)), ("roll", None)]

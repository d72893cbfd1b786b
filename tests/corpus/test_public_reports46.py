"""A forty-sixth round of files after public bug reports about tensor layout in attention: a padding mask transposed
onto the queries, a rotary table lined up with the heads, a softmax over the queries, a sliding-window cache cut
before a chunk attends, class queries whose heads are merged without a transpose (tests/corpus/reports46; each
file's docstring cites its report), traced at their DIMS and at equal sizes (B = T = H = 4, or the file's
``EQUAL``). First sight recorded on the working tree (main, plus the round's files).

* llama_expand_mask_transposed — huggingface/transformers pull request #26421 (closed unmerged; the reviewer: "You
  are transposing target and source length"): ``_expand_mask(...).transpose(-2, -1)`` (``mask-transposed``); the
  padding mask filled without ``1.0 - expanded`` (``mask-not-inverted``);
* leo_rotary_on_heads — vukrosic/leo-optimizer pull request #2 (and #3): the ``x_BTHD`` rotary handed head-first
  ``[B, H, T, D]`` q and k, its tables cut ``[:x.size(-3)]`` = H rows (``rotary-on-heads``); the attention output
  reshaped to ``(B, T, D)`` without ``transpose(1, 2)`` (``merge-without-transpose``);
* llmsfs_cn_causal_softmax_dim — datawhalechina/llms-from-scratch-cn issue #54 (fixed in 5e6ec49):
  ``CausalAttention``'s ``torch.softmax(..., dim=1)`` on ``[b, num_tokens, num_tokens]`` (``softmax-dim-1``); the
  mask buffer ``tril(..., diagonal=-1)`` (``mask-tril``);
* rasbt_swa_chunk_window — rasbt/LLMs-from-scratch issue #1008 (pull request #1013): the sliding-window cache cut to
  the last W keys before a chunk of N queries attends (``cut-before-attention``); the oldest W kept in the cache
  (``cache-keeps-oldest``);
* trans2seg_decoder_heads — xieenze/Trans2Seg issue #4 (open; the author: the code "train and test well"):
  ``Attention_Decoder``'s ``(attn @ v).reshape(B, n_class, C)`` from ``[B, heads, n_class, d]`` with the split fixed
  (``merge-without-transpose``); the repository's code, split and merge both without a permute (``as-released``).

First sight (``round_outcome`` at each DIMS / at its equal sizes; ``dependencies=True`` gives the same outcome
except where a second entry says so; the CLI, ``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, agrees at
DIMS except where noted).

============================  =======================  ============================================================
file                          variant                  round_outcome (DIMS / EQUAL)
============================  =======================  ============================================================
llama_expand_mask_transposed  (correct)                ✓ / ?   (CLI at DIMS: ? 38 of 48, the rotary table's width)
llama_expand_mask_transposed  mask-transposed          ✗ mask-wrong-axis / the same
llama_expand_mask_transposed  mask-not-inverted        ✗ mask-hides-every-key (x2) / ? (order-of-equal-sizes)
leo_rotary_on_heads           (correct)                ✓ / ?
leo_rotary_on_heads           rotary-on-heads          ✗ rotary-same-angle-every-token / ?
leo_rotary_on_heads           merge-without-transpose  ✗ mixed-axis / ✗ broadcast-mismatch
llmsfs_cn_causal_softmax_dim  (correct)                ✓ / **✗ broadcast-mismatch** (false; fixed since)
llmsfs_cn_causal_softmax_dim  softmax-dim-1            ✗ softmax-wrong-axis / ✗ broadcast-mismatch (the false one)
llmsfs_cn_causal_softmax_dim  mask-tril                ✗ causal-mask-reversed / ✗ broadcast-mismatch (the same)
rasbt_swa_chunk_window        (correct)                ? / ?   (65 of 65: the cache's cuts ``(T+N)[2:8]``)
rasbt_swa_chunk_window        cut-before-attention     ? / ?   (67 of 67, the same reason; nothing on the cut)
rasbt_swa_chunk_window        cache-keeps-oldest       ? / ?   (65 of 65, the same reason, ``(T+N)[0:6]``)
trans2seg_decoder_heads       (correct)                ? / ?   (7 of 18; dependencies: **✗ tokens-never-mix** / ?)
trans2seg_decoder_heads       merge-without-transpose  ? / ?   (a false note; dependencies: ✗ tokens-never-mix / ?)
trans2seg_decoder_heads       as-released              ? / ?   (dependencies: ✗ tokens-never-mix / ?)
============================  =======================  ============================================================

No bug gets ``✓`` (``MISSED`` is empty), but four keep ``?`` only for reasons that are not their bug:

* ``rasbt_swa_chunk_window`` (both bugs): the same ``?`` as the correct file (the cache's window cuts, "names cannot
  tell which tokens of which sequence it holds") and no diagnostic at all; the CLI adds "the causal mask holds". In
  ``cut-before-attention`` the chunk's first query loses the two oldest keys its window covers; in
  ``cache-keeps-oldest`` the decoded token reads the prompt's keys under the newest positions' labels;
* ``trans2seg_decoder_heads`` (both bugs): the class queries come from a parameter (``cls_embed``), so T is never
  named (``[B=2, 3, ...]``) and the matmuls, softmax and merges go unchecked. ``merge-without-transpose`` mixes the
  classes (class 0's output reads the queries of classes 0, 1 and 2, measured) yet gets only a note that calls it
  harmless: "reshape #15 lays out the features as [B=2, 3, !H·d_k=32] rather than H=4 heads of d_k=8 contiguous
  features ... It is consistent, so a model trained this way works".

False or misleading messages (for the engine, not fixed in this round):

* ``llmsfs_cn_causal_softmax_dim`` at equal sizes: the correct file gets ``✗ broadcast-mismatch``, "masked_fill_ #6
  lines up [B=4, T=4] with [B=4, T=4, T=4] from the right: axis -2 pairs B (batch) of the first with T (tokens)":
  the ``[T, T]`` causal buffer (``block_size`` = T) is read ``[B, T]``. The two bugs' real findings are then only
  "Not reported ... order-of-equal-sizes" while the false error is reported;
* ``trans2seg_decoder_heads`` with dependencies (and the CLI): ``✗ tokens-never-mix`` on the correct file, "no
  output token reads another token ... each output is made of its own token alone": the module returns the raw
  score maps ``attn1.permute(0, 2, 1, 3)`` ``[B, T, H, S]`` (Trans2Seg's segmentation maps, by design before the
  softmax), whose key column s depends on feature token s alone; its other output, the class queries, reads every
  feature token. Also: with Trans2Seg's own refinement of the maps kept (``norm4 = LayerNorm(feat_HxW)``, ``mlp3``,
  left out of the file) the correct file got ``✗ norm-over-tokens`` at DIMS, "layer_norm #22 normalises [B=2, 3,
  H=4, S=6] over its last axis (S), which holds tokens, not features" (by design: each class map is normalised over
  its pixels);
* ``llama_expand_mask_transposed`` (``mask-transposed``): caught, but worded "a real token is masked along the
  queries": the rows hidden are those of the left padding (tokens 0 and 1 of entry 0), and "every key hidden, or
  every key opened as a row with none left" is hard to read. The correct file is ``✓`` through the API but ``?``
  in the CLI ("not checked (unnamed axes): #25 __getitem__, #26 __getitem__, #27 squeeze ..."): run as a script the
  rotary tables are built under the trace and their width ``8`` (d_k) is left unnamed.

Since first sight (tests/engine/test_round63_fixes.py tests each):

* a tensor a running module holds (the ``[block_size, block_size]`` causal buffer) is never seeded with a batch
  axis where a seed without one fits: llmsfs_cn's correct file is ``?`` at equal sizes (no false
  ``broadcast-mismatch``), and its two bugs keep their own errors there (``softmax-wrong-axis``,
  ``causal-mask-reversed``, each with the order-of-equal-sizes caveat);
* ``tokens-never-mix`` is not claimed on a call that returns other floating-point tensors besides the one measured:
  trans2seg's correct file and its bugs are ``?`` with dependencies too;
* a rotary table or causal mask whose ancestry meets the data's only in integer or boolean tensors (positions
  counted along the padding mask that also padded the ids, both built under the trace) is still checked on its
  values: llama_expand_mask_transposed is ``✓`` in the CLI as through the API.
"""

from __future__ import annotations

import torch

from tests.corpus.helpers import round_tests
from tests.corpus.reports46 import (
    leo_rotary_on_heads,
    llama_expand_mask_transposed,
    llmsfs_cn_causal_softmax_dim,
    rasbt_swa_chunk_window,
    trans2seg_decoder_heads,
)

MODULES = (llama_expand_mask_transposed, leo_rotary_on_heads, llmsfs_cn_causal_softmax_dim, rasbt_swa_chunk_window,
           trans2seg_decoder_heads)
UNSURE, SURE = ("?", ()), ("✓", ())
BROADCAST = ("✗", ("broadcast-mismatch",))

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (llama_expand_mask_transposed, ""): [SURE, UNSURE],
    (llama_expand_mask_transposed, "mask-transposed"): [("✗", ("mask-wrong-axis",))] * 2,
    (llama_expand_mask_transposed, "mask-not-inverted"): [("✗", ("mask-hides-every-key",) * 2), UNSURE],
    (leo_rotary_on_heads, ""): [SURE, UNSURE],
    (leo_rotary_on_heads, "rotary-on-heads"): [("✗", ("rotary-same-angle-every-token",)), UNSURE],
    (leo_rotary_on_heads, "merge-without-transpose"): [("✗", ("mixed-axis",)), BROADCAST],
    (llmsfs_cn_causal_softmax_dim, ""): [SURE, UNSURE],
    (llmsfs_cn_causal_softmax_dim, "softmax-dim-1"): [("✗", ("softmax-wrong-axis",))] * 2,
    (llmsfs_cn_causal_softmax_dim, "mask-tril"): [("✗", ("causal-mask-reversed",))] * 2,
    (rasbt_swa_chunk_window, ""): [UNSURE, UNSURE],
    (rasbt_swa_chunk_window, "cut-before-attention"): [UNSURE, UNSURE],
    (rasbt_swa_chunk_window, "cache-keeps-oldest"): [UNSURE, UNSURE],
    (trans2seg_decoder_heads, ""): [UNSURE, UNSURE],
    (trans2seg_decoder_heads, "merge-without-transpose"): [UNSURE, UNSURE],
    (trans2seg_decoder_heads, "as-released"): [UNSURE, UNSURE],
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)


def test_the_swa_fix_matches_windowed_attention_over_the_whole_sequence_and_the_bugs_do_not():
    """rasbt #1013's keep of ``W + num_tokens - 1`` keys gives, call by call, what one uncached pass over the prompt,
    the chunk and the decoded token gives with the window mask; both bugs change the chunk's or the token's rows."""
    def windowed_reference(att, x, window):
        b, n, _ = x.shape
        q, k, v = (w(x).view(b, n, att.num_heads, att.head_dim).transpose(1, 2)
                   for w in (att.W_query, att.W_key, att.W_value))
        diff = torch.arange(n)[:, None] - torch.arange(n)[None, :]
        scores = (q @ k.transpose(2, 3)).masked_fill((diff < 0) | (diff >= window), -torch.inf)
        weights = torch.softmax(scores / att.head_dim ** 0.5, dim=-1)
        return att.out_proj((weights @ v).transpose(1, 2).reshape(b, n, att.d_out))

    for bug in ("", *rasbt_swa_chunk_window.BUGS):
        model, inputs = rasbt_swa_chunk_window.build(bug)
        with torch.no_grad():
            out = model(*inputs)
            ref = windowed_reference(model.att, torch.cat(inputs, dim=1), model.att.sliding_window_size)
        assert torch.allclose(out, ref, atol=1e-5) == (bug == ""), bug


def test_trans2seg_as_released_keeps_each_class_output_to_its_own_query_but_not_its_maps():
    """The two unpermuted reshapes of Trans2Seg's ``Attention_Decoder`` undo each other on the class outputs (class
    0 reads only its own query), not on the returned maps (class 0's maps for heads 2 and 3 read classes 1 and 2);
    the merge alone (``merge-without-transpose``) mixes the classes in the outputs."""
    def classes_read(bug, pick):
        model, (feat,) = trans2seg_decoder_heads.build(bug)
        query = torch.randn(2, 3, 32, requires_grad=True)
        grad, = torch.autograd.grad(pick(*model.blocks_decoder[0].attn(query, feat)).sum(), query)
        return (grad.abs().sum((0, 2)) > 0).nonzero().flatten().tolist()

    assert classes_read("as-released", lambda attn, x: x[:, 0]) == [0]
    assert [classes_read("as-released", lambda attn, x, h=h: attn[:, 0, h]) for h in range(4)] == [[0], [0], [1], [2]]
    assert classes_read("", lambda attn, x: attn[:, 0]) == [0]
    assert classes_read("merge-without-transpose", lambda attn, x: x[:, 0]) == [0, 1, 2]

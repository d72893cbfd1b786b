"""The v3 corpus (issue 21): small attention modules in the styles of public code, each with its truth.

Every case module (``tests/corpus/<case>.py``) exposes:

- a docstring naming the public code style it follows (``Style:``) and, for a bug taken from a public
  tracker, the report (``Report:`` repository, number, URL);
- ``CATEGORY``: one of :data:`CATEGORIES`;
- ``SIZES``: dims dicts passed as they are to ``shapetrace.trace(dims=...)``, equal sizes included;
- ``build(dims) -> (model, inputs)``: the module (eval mode) or a plain function, and its inputs;
- optionally ``drive(model, inputs)``: what runs inside the trace (default ``model(*inputs)``): a
  prefill followed by decode steps, say;
- ``BUG``: None for correct code, or ``(severity, kind)`` that must be reported at an event recorded on
  the line tagged ``[bug]`` (a callable ``BUG(dims)`` where the kind depends on the sizes);
- optionally ``RAISES = True`` when the traced code fails on purpose (a view torch refuses), and
  ``NO_NOTES``: kinds that must not appear even as a note.

A line whose comment ends in ``[tag]`` is a key tensor, as in ``tests/styles``: the output of the last
event recorded on that line carries exactly the names in the comment's parentheses. Extensions:

- groups separated by `` | `` are the successive events of that line, in order (a line run once per
  decode step: ``(B, H, T, d_k) | (B, H, T+1, d_k)``);
- ``{expr}`` inside a name is evaluated with the dims (``T[{T-1}:{T}]`` reads ``T[5:6]`` at T = 6);
- ``[bug]`` marks the line where the diagnostic must fire; its parentheses (if any) are not checked.
"""

from __future__ import annotations

import importlib
import inspect
import re
from types import ModuleType

CATEGORIES = ("vision", "decoding", "fused", "local", "rope", "broadcast", "mm", "merge", "whole")

CASE_NAMES = [
    # vision
    "vit_patch_embed_cls", "deit_distilled", "vit_flatten_no_permute", "vit_flatten_no_permute_square",
    "swin_from_pixels", "vit_f_unfold", "vit_tensor_unfold_mixed", "vit_tensor_unfold_permuted",
    # decoding with caches
    "gpt2_legacy_tuple_cache", "decode_step_slices", "static_cache_setitem", "static_cache_index_copy",
    "new_zeros_cache_slices", "mla_new_empty", "mla_absorbed_decode", "cache_append_wrong_axis",
    "sdpa_is_causal_decode", "sdpa_is_causal_decode_fixed", "decode_view_one_token",
    # fused kernels
    "sdpa_flash_nanogpt", "sdpa_missing_transpose", "sdpa_triu_mask_polarity", "sdpa_tril_mask",
    "mha_triu_mask", "sdpa_padding_polarity", "sdpa_padding_keep", "sdpa_enable_gqa",
    "gqa_repeat_interleave", "gqa_repeat_tiled", "softmax_implicit_dim", "softmax_explicit_dim",
    # local / windowed
    "local_as_strided", "local_tensor_unfold", "longformer_chunks", "local_as_strided_mixed",
    # rope
    "rope_complex_meta", "rope_rotate_half", "rope_table_over_heads", "rope_complex_no_reshape",
    # broadcasting
    "mask_btt_on_heads", "mask_unsqueezed",
    # mm / matmul family
    "mm_per_head", "mm_no_transpose", "matmul_no_transpose", "bmm_folded_heads", "einsum_scores",
    "swapaxes_split",
    # merges
    "merge_reshape_no_transpose", "heads_view_folded_batch", "chunk_view_fails", "chunk_view_transpose",
    "merge_view_noncontiguous",
    # whole models written with torch alone
    "whole_gpt_decode", "whole_vit_pixels",
]


def load(name: str) -> ModuleType:
    return importlib.import_module(f"tests.corpus.{name}")


# -- tags -------------------------------------------------------------------------------------------

_TAG = re.compile(r"#(?P<comment>.*)\[(?P<tag>\w+)\]\s*$")
_GROUP = re.compile(r"\(([^()]*)\)")
_EXPR = re.compile(r"\{([^{}]+)\}")


def _fill(name: str, dims: dict) -> str:
    return _EXPR.sub(lambda m: str(eval(m.group(1), {}, dict(dims))), name)   # noqa: S307 (test data)


def tags(module: ModuleType, dims: dict) -> list[tuple[str, int, list[list[tuple[str, ...]]]]]:
    """(tag, line, expected groups per successive event) for every tagged line of ``module``."""
    found = []
    for number, line in enumerate(inspect.getsource(module).splitlines(), start=1):
        m = _TAG.search(line)
        if not m:
            continue
        steps = []
        for part in m.group("comment").split(" | "):
            groups = [tuple(_fill(p.strip(), dims) for p in g.split(",")) for g in _GROUP.findall(part)]
            steps.append(groups)
        found.append((m.group("tag"), number, steps))
    return found


def bug_lines(module: ModuleType) -> list[int]:
    """Lines tagged ``[bug]``: where the expected diagnostic must be reported."""
    lines = inspect.getsource(module).splitlines()
    return [n for n, line in enumerate(lines, start=1) if line.rstrip().endswith("[bug]")]


def events_on_line(trace, module: ModuleType, line: int) -> list:
    path = inspect.getsourcefile(module).replace("\\", "/")
    tail = "/".join(path.split("/")[-2:])  # corpus/vit_patch_embed_cls.py
    out = []
    for e in trace.events:
        where, _, number = e.source.rpartition(":")
        if number.isdigit() and int(number) == line and where.replace("\\", "/").endswith(tail):
            out.append(e)
    return out

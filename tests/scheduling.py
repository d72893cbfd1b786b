"""The order the suite's tests start in: the longest first, on every worker at once.

pytest-xdist's ``worksteal`` hands each worker an equal, contiguous share of the collected tests (the
first ``n // workers`` to the first, and so on) and, when one runs dry, moves the back half of the
longest queue to it. Collected in file order, the few tests that take half a minute or more (the
checker's, the browser's, the terminal's) start wherever their file falls, often late, and a run can
end with one core working and the other idle. :func:`plan` puts them at the front of the shares
instead, spread over the workers longest first (each to the share with the least work so far), and
fills the shares with the other tests in their own order, so stealing has short tests to balance
with at the end. Only the order changes: every test runs, with the same fixtures and assertions.

A block is one or more node-id prefixes whose tests start together on one worker: a file whose
tests share a costly module fixture, or files that read one ``once_per_run`` result (on two workers,
the second to ask would wait idle for the first).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

import pytest


class Block(NamedTuple):
    """Tests that start together on one worker, before every test no block names."""

    seconds: float  #: their wall time in one measured run (only the order of these numbers matters)
    prefixes: tuple[str, ...]  #: node-id prefixes: a file, a test, a test with all its parameters
    apart: bool = False  #: each test it names is a block of its own, of ``seconds`` each


_X = "tests/exercises/"
#: The blocks, with each one's seconds of wall in a whole run with a per-test timeline (each test's start
#: and end on each worker; Nov 2026, this 2-core machine shared, load 6-20: 2,254 s where CI's quiet runs
#: took 457-538 s).
#: A prefix that names no test fails tests/test_layers.py.
LONG: tuple[Block, ...] = (
    Block(210, (_X + "test_sandbox_layers_round4.py::test_as_an_ordinary_user",)),  # the suite's files again
    Block(216, (_X + "test_sandbox_layers_round4.py",)),
    Block(30, (_X + "test_reference_steady.py::test_every_reference_passes_20_times_through_the_child_and_"
                    "the_judge",), apart=True),  # 20 exercises, 18-67 s each
    Block(340, (_X + "test_lessons.py", _X + "test_test_exercises.py")),  # one curriculum_verdicts
    Block(186, ("tests/test_layers.py",)),
    Block(28, (_X + "test_sealed.py",)),  # 177 before its 15 scripts forked from the zygote (-n 0: 198 -> 32 s)
    Block(157, ("tests/tui/test_step.py",)),
    Block(42, ("tests/live/test_pages.py",), apart=True),  # a class of 30 in Chromium
    Block(125, (_X + "test_sandbox_layers.py",)),
    Block(125, (_X + "test_indistinguishable.py",)),
    Block(119, (_X + "test_checker.py",)),
    Block(95, (_X + "test_hostile_corpus.py",)),
    Block(71, ("tests/render/test_page_scales.py",)),  # each file of these three: one Chromium
    Block(50, ("tests/render/test_contrast.py",)),
    Block(33, ("tests/render/test_page.py",)),
    Block(30, ("tests/engine/test_op_corpus.py",)),  # one op_db import (3.6 s) on one worker; 11.6 s at -n 0, load 3
)


#: Workers for ``-n auto``: one more than the cores. Many of the suite's tests wait (a sandbox or a CLI
#: process starting, a tmux screen, Chromium, a time limit running out), and while they wait their worker's
#: core idles: measured, two workers kept 1.3-1.5 of two cores busy (benchmarks/README.md, "The suite's
#: time"). pyproject's ``--maxprocesses`` caps the count.
EXTRA_WORKERS = 1


def auto_workers(cores: int) -> int:
    """How many workers ``-n auto`` starts on ``cores`` cores (before ``--maxprocesses``).

    >>> auto_workers(2)
    3
    """
    return max(cores, 1) + EXTRA_WORKERS


def _matches(node_id: str, prefix: str) -> bool:
    """Whether ``prefix`` names this test: itself, its file or class, or every parameter of it."""
    return node_id == prefix or node_id.startswith((prefix + "::", prefix + "["))


def share_sizes(count: int, workers: int) -> list[int]:
    """How many of ``count`` tests worksteal first sends to each worker, as it computes them.

    >>> share_sizes(10, 3)
    [3, 3, 4]
    """
    sizes, left = [], count
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def blocks_of(node_ids: Sequence[str], long=LONG) -> list[tuple[float, list[int]]]:
    """Each block of ``long`` that names a collected test: (seconds, indices of its tests in collected
    order); a test named by two blocks goes to the first."""
    taken: set[int] = set()
    blocks = []
    for block in long:
        members = [i for i, node_id in enumerate(node_ids)
                   if i not in taken and any(_matches(node_id, p) for p in block.prefixes)]
        taken.update(members)
        if block.apart:
            blocks += [(block.seconds, [i]) for i in members]
        elif members:
            blocks.append((block.seconds, members))
    return blocks


def plan(node_ids: Sequence[str], workers: int, long=LONG) -> list[int]:
    """The indices of ``node_ids`` in the order to hand them to pytest-xdist with ``workers`` workers.

    >>> plan(["a", "b", "c", "d", "e", "f"], 2, long=(Block(9, ("e",)), Block(5, ("c",))))
    [4, 0, 1, 2, 3, 5]
    """
    sizes = share_sizes(len(node_ids), workers)
    heads: list[list[int]] = [[] for _ in sizes]
    load = [0.0] * len(sizes)
    for seconds, members in sorted(blocks_of(node_ids, long), key=lambda b: -b[0]):
        lane = min((i for i in range(len(sizes)) if len(heads[i]) + len(members) <= sizes[i]),
                   key=lambda i: (load[i], i), default=None)
        if lane is None:  # too few tests selected to give each block a share's room: no reordering
            return list(range(len(node_ids)))
        heads[lane] += members
        load[lane] += seconds
    placed = {i for head in heads for i in head}
    rest = iter(i for i in range(len(node_ids)) if i not in placed)
    order = []
    for head, size in zip(heads, sizes):
        order += head + [next(rest) for _ in range(size - len(head))]
    return order


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected: the shares are of what runs
def pytest_collection_modifyitems(config, items):
    """Each pytest-xdist worker collects alone, and all must hand the same order back: :func:`plan`
    reads only the node ids and the worker count. Without workers (``-n 0``) the order is the files'."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        items[:] = [items[i] for i in plan([item.nodeid for item in items], workers)]

"""Which tensors were made from a size guess: a tensor the model holds (a registered buffer, a tensor
attribute) whose shape fits more than one seed (``[4, 4]`` at B = T = 4 is ``[B, T]`` or ``[T, B]``, or
no such thing: a window's relative-position index, T5's bucketed distances), or anything computed from
one. The traced code's own input is what the declared sizes describe, in their order: its names at equal
sizes are the declared reading (never proven: the verdict says so), not a guess of this kind.

The names such a tensor carries may be wrong, so they never cross an index: element provenance never
hands them on where the tensor picks (``table[index]`` takes the index's names only when they are
proven: :class:`.elements._Picks`), nor does a lookup (``embedding(buckets)``: :func:`.record.unguessed_index`).
A guess a later use settles (:mod:`.corrections`) is pinned, no longer a guess, in the walk after it.
The walk goes back through every record that made a node, in-place writes included, and is memoised per node.

Reads: the capture's records up to the one being inferred, ``state.ambiguous``. Adds: nothing.
"""

from __future__ import annotations


class Guesses:
    """``made_from_a_guess(state, node)`` over one inference, its makers read incrementally (the state is
    passed in, never held: no reference cycle keeps a capture alive after its trace)."""

    def __init__(self):
        self.makers: dict[int, list[int]] = {}
        self.read = 0
        self.memo: dict[int, bool] = {}

    def made_from_a_guess(self, state, node: int) -> bool:
        if not state.ambiguous:
            return False
        self._read_makers(state)
        records, stack, seen = state.capture.records, [node], {node}
        while stack:
            current = stack.pop()
            known = self.memo.get(current)
            if known or _held_guess(state, current):
                self.memo[node] = True
                return True
            if known is False and current != node:
                continue   # (its ancestry was walked: no guess in it)
            for index in self.makers.get(current, ()):
                for n in records[index].ins:
                    if isinstance(n, int) and n not in seen:
                        seen.add(n)
                        stack.append(n)
        self.memo[node] = False
        return False

    def _read_makers(self, state) -> None:
        records = state.capture.records
        upto = min(state.index + 1, len(records))
        for index in range(self.read, upto):
            for node in getattr(records[index], "outs", ()):
                if isinstance(node, int):
                    self.makers.setdefault(node, []).append(index)
        self.read = max(self.read, upto)


def _held_guess(state, node: int) -> bool:
    """Is ``node`` (or the entered tensor whose same-axes copy it is) a size guess on a tensor the model holds?"""
    root = state.ambiguous.get(node)
    return root is not None and state.capture.nodes[root].held

"""Claim each recorded call's autograd nodes while the forward runs, and hook them for the backward.

A call the capture records (``q @ k_t``) may make several autograd nodes: ``matmul`` on 4-d operands
is ``expand, view, bmm, _unsafe_view`` inside, so its output's ``grad_fn`` is an ``UnsafeViewBackward0``
whose inputs lead, through the others, to its operands' ``grad_fn``. :meth:`GradGraph.note` walks from
the outputs' ``grad_fn`` along ``next_functions`` and claims every node it meets for that record,
stopping at the operands' own nodes, at nodes an earlier record claimed and at leaves
(``AccumulateGrad``): those edges are where its gradients leave it, each tied to the operand it goes to.

Each claimed node gets a pre-hook (the gradients arriving at it) and a post-hook (the gradients it
makes). The hooks keep the gradient tensors themselves until :meth:`GradGraph.release` (so that
storage shows exactly which gradient is a view of which): a traced backward holds its gradients a
little longer than an untraced one; the bytes reported are the tensors' own.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch


class Boundary(NamedTuple):
    """An edge by which a gradient leaves a record's nodes: the ``slot`` of the node's ``grad_inputs``,
    which operand of the record it goes to (its position among the operands; None: a tensor the call
    used that is not one of its recorded operands, such as a linear's weight), and the leaf tensor it is
    accumulated into (a parameter), if it goes to one."""

    slot: int
    operand: int | None
    leaf: Any = None


class Claim(NamedTuple):
    """One record's autograd nodes, found when its call returned."""

    record: int
    outputs: tuple               # (node, output_nr) of each recorded output, or None (no grad_fn)
    nodes: tuple                 # every node the record made (its outputs' first)
    boundaries: dict             # node -> tuple[Boundary, ...]


class Step(NamedTuple):
    """A node that ran in the backward: its record, its name, what arrived and what it made."""

    record: int | None           # None: a node no record claimed (the loss's own ``sum``)
    node: Any
    name: str
    arrived: tuple               # grad_outputs (tensors or None)
    made: tuple                  # grad_inputs (tensors or None)


def is_leaf_node(node: Any) -> bool:
    """An ``AccumulateGrad``: where a leaf's (a parameter's) gradient is added into ``.grad``."""
    return hasattr(node, "variable")


class GradGraph:
    """The autograd nodes of a traced forward, each claimed by the record that made it, hooked."""

    def __init__(self, on_start=None) -> None:
        self.on_start = on_start   # called once as each backward through these nodes starts (may raise)
        self.runs = 0              # how many backward passes ran through them
        self.run_ops: list[list[str]] = []   # the nodes each backward ran, by name (only the first's are kept)
        self._task: int | None = None
        self.claims: list[Claim] = []
        self.owner: dict[Any, int] = {}          # node -> index in claims
        self.leaves: dict[Any, torch.Tensor] = {}   # AccumulateGrad node -> its leaf tensor
        self.steps: list[Step] = []
        self.last_output: torch.Tensor | None = None   # the last recorded result that requires grad
        self._handles: list = []
        self.ran = False

    # -- while the forward runs ---------------------------------------------------------------
    def note(self, record: int, outputs, operands) -> None:
        """The call recorded as ``record`` returned ``outputs`` from ``operands``: claim its nodes."""
        outs = tuple(_edge_of(o) for o in outputs)
        starts = [edge[0] for edge in outs if edge is not None and edge[0] not in self.owner]
        if not starts:
            return
        stops = {_edge_of(t): i for i, t in enumerate(operands) if t.requires_grad}
        leaf_of = {id(t): i for i, t in enumerate(operands) if t.requires_grad and t.grad_fn is None}
        nodes, boundaries = self._walk(starts, stops, leaf_of)
        index = len(self.claims)
        self.claims.append(Claim(record, outs, tuple(nodes), boundaries))
        for node in nodes:
            self.owner[node] = index
            self._hook(node)
        for o in outputs:
            if o.requires_grad:
                self.last_output = o

    def _walk(self, starts: list, stops: dict, leaf_of: dict) -> tuple[list, dict]:
        """Every node reachable from ``starts`` before an operand's node, a claimed node or a leaf."""
        nodes, boundaries, seen = [], {}, set(starts)
        todo = list(starts)
        while todo:
            node = todo.pop(0)
            nodes.append(node)
            edges = []
            for slot, (child, number) in enumerate(node.next_functions):
                if child is None:
                    continue
                if (child, number) in stops or child in self.owner or is_leaf_node(child):
                    leaf = is_leaf_node(child)
                    edges.append(Boundary(slot, _operand_of(child, number, stops, leaf_of),
                                          child.variable if leaf else None))
                    if leaf:
                        self._hook_leaf(child)
                elif child not in seen:
                    seen.add(child)
                    todo.append(child)
            if edges:
                boundaries[node] = tuple(edges)
        return nodes, boundaries

    def _hook(self, node: Any) -> None:
        steps = self.steps
        record = self.claims[self.owner[node]].record

        def ran(made, arrived):
            if self._started(node):
                steps.append(Step(record, node, node.name(), tuple(arrived), tuple(made)))

        self._handles.append(node.register_hook(ran))

    def _hook_leaf(self, node: Any) -> None:
        if node in self.leaves:
            return
        self.leaves[node] = node.variable
        steps = self.steps

        def arrived(grads):
            if self._started(node):
                steps.append(Step(None, node, node.name(), tuple(grads), ()))

        self._handles.append(node.register_prehook(arrived))

    def _started(self, node: Any) -> bool:
        """Each hook of a backward: the first of each (autograd's graph task) counts it and calls
        :attr:`on_start`, which may raise to stop it before any gradient reaches a leaf. True while the
        first backward runs: its gradients are kept; a later one's (a training loop's) are only named."""
        task = torch._C._current_graph_task_id()
        if task != self._task:
            self._task = task
            self.runs += 1
            self.run_ops.append([])
            if self.on_start is not None:
                self.on_start()
        self.run_ops[-1].append(node.name())
        return self.runs == 1

    # -- after it ------------------------------------------------------------------------------
    def run_backward(self, loss: torch.Tensor | None = None) -> None:
        """Run the backward of ``loss`` (default: the sum of the last recorded result that requires grad),
        unless a backward already ran through the hooked nodes (the traced code's own ``.backward()``)."""
        if self.steps:
            self.ran = True
            return
        target = loss if loss is not None else self.last_output
        if target is None or not target.requires_grad:
            return
        with torch.enable_grad():
            (target if target.numel() == 1 else target.sum()).backward()
        self.ran = True

    def release(self) -> None:
        """Take the hooks off and let the gradients and nodes go (the rows keep plain facts)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.steps = []
        self.run_ops = []
        self.claims = []
        self.owner = {}
        self.leaves = {}
        self.last_output = None


def _edge_of(t: torch.Tensor) -> tuple | None:
    """``(grad_fn, output_nr)`` of a non-leaf tensor, None for a leaf or a tensor without grad."""
    fn = t.grad_fn
    return None if fn is None else (fn, t.output_nr)


def _operand_of(child: Any, number: int, stops: dict, leaf_of: dict) -> int | None:
    """Which operand an edge to ``child`` carries a gradient to (None: none of the recorded operands)."""
    if is_leaf_node(child):
        return leaf_of.get(id(child.variable))
    return stops.get((child, number))

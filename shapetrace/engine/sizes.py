"""Sizes that carry where they were read: ``x.size(1)`` is the size of that node's axis 1.

While a trace records, ``Tensor.size(dim)`` returns a :class:`SizeOf`: an ``int`` in every way that
also remembers the node and axis it was read from, so a tensor built from it (``torch.arange(n)``,
``torch.zeros(n, m)``) or an axis grown to it (``cls_token.expand(x.size(0), -1, -1)``) can be given
that axis's name. ``x.shape`` and ``x.size()`` (which the trace's mode sees as the ``shape`` getter and
``Tensor.size`` with no argument) return a ``torch.Size`` whose items are :class:`SizeOf`: torch.Size
keeps an ``int`` subclass as it is given, and so do its indexing, slicing and ``+``, so
``x.shape[-1]``, ``B, T, C = x.size()``, ``*_, d = x.shape`` and ``x.size()[:-1] + (H, d)`` carry
their axes exactly as ``x.size(i)`` does. Nothing here compares values: an int that was not read from
an axis carries nothing, and arithmetic on a :class:`SizeOf` (``n + 1``, ``C // n_head``) gives a
plain ``int``; except a sum with another int (``past + T``: a cache's length and the new tokens'),
a :class:`SizeSum` that keeps its two terms, so that ``arange(past, past + T)`` counts T, and a floor
division by a plain int, a :class:`SizeQuot` (a fold's leading pieces: ``(B·H) // H``).

A :class:`SizeOf` names an axis only in the capture that read it (its ``stamp``): a library's cache
keyed by the int's value (einops keeps the shapes it built in an ``lru_cache``) can hand a later call,
or a later trace, the int object an earlier one read, whose node and axis are another tensor's.
"""

from __future__ import annotations

from itertools import count

import torch


class SizeOf(int):
    """An axis size read from a traced tensor: ``node`` and ``axis`` say which."""

    node: int
    axis: int
    stamp: int    # which capture read it (:attr:`SizeReads.stamp`)

    def __reduce__(self):   # pickled, copied or sent elsewhere: a plain int
        return int, (int(self),)

    def __add__(self, other):
        return _sum(self, other) if type(other) in _TERMS else int.__add__(self, other)

    def __radd__(self, other):
        return _sum(other, self) if type(other) in _TERMS else int.__radd__(self, other)

    def __floordiv__(self, other):
        if type(other) is not int or other <= 0:
            return int.__floordiv__(self, other)
        out = SizeQuot(int.__floordiv__(self, other))
        out.of, out.by = self, other
        return out


class SizeQuot(int):
    """``n // k`` where ``n`` was read from an axis and ``k`` is a plain int (Bloom's ``batch_size =
    batch_size_and_num_heads // self.num_heads``): the leading pieces of that axis, those left when pieces
    of ``k`` entries are taken from its end (:func:`~.infer.sizes.regrouped_one` reads it). Its own
    arithmetic gives plain ints."""

    of: SizeOf
    by: int

    def __reduce__(self):
        return int, (int(self),)


class SizeSum(int):
    """``a + b`` where ``a`` or ``b`` was read from an axis (``past + T``): both terms, as given. Its own
    arithmetic gives plain ints; only a count that starts at one term reads the other
    (:func:`other_term`)."""

    terms: tuple

    def __reduce__(self):
        return int, (int(self),)


def _sum(a, b) -> SizeSum | SizeOf:
    """``a + b`` as a :class:`SizeSum`; a size read plus a literal 0 is that size read itself (transformers'
    ``kv_length = query_length + past_seen_tokens`` before any cache: the keys' count read from the tokens)."""
    if type(b) is int and b == 0 and type(a) is SizeOf:
        return a
    if type(a) is int and a == 0 and type(b) is SizeOf:
        return b
    out = SizeSum(int.__add__(int(a), int(b)))
    out.terms = (a, b)
    return out


def other_term(total, start):
    """What ``total`` adds to ``start``: ``T`` for ``past + T`` or ``T + past`` from ``past`` (the same read,
    or the same plain int: BERT's ``position_ids[:, cache_length : seq_length + cache_length]``), ``total``
    itself from a literal 0; None when ``total`` is no such sum."""
    if type(start) is int and start == 0 and type(total) is not SizeSum:
        return total
    if type(total) is not SizeSum:
        return None
    a, b = total.terms
    if _same_read(a, start):
        return b
    return a if _same_read(b, start) else None   # ``T + past`` from ``past``: a sum either way round


def _same_read(a, b) -> bool:
    if type(a) is SizeOf and type(b) is SizeOf:
        return (a.node, a.axis) == (b.node, b.axis)
    return type(a) is int and type(b) is int and a == b


def size_of(value: int, node: int, axis: int, stamp: int = -1) -> SizeOf:
    out = SizeOf(value)
    out.node, out.axis, out.stamp = node, axis, stamp
    return out


_STAMPS = count()


class SizeReads:
    """The size reads of one capture, called as ``reads(args, kwargs)`` with a size read's arguments:
    ``x.size()`` / ``x.shape`` (``args == (x,)``) is a ``torch.Size`` of :class:`SizeOf`, one per axis,
    made once per node (a node keeps its shape); ``x.size(dim)`` is that axis's :class:`SizeOf`."""

    def __init__(self, node_of):
        self.node_of = node_of        # tensor -> the node it holds now
        self.shapes: dict = {}        # node -> its torch.Size of SizeOf
        self.stamp = next(_STAMPS)    # this capture's: a size read by another names nothing here

    def __call__(self, args, kwargs):
        t = args[0]
        if len(args) == 1 and not kwargs:
            node = self.node_of(t)
            shape = self.shapes.get(node)
            if shape is None or shape != t.shape:   # (a shape swapped under a node: ``x.data = y``)
                shape = self.shapes[node] = _TORCH_SIZE([size_of(n, node, i, self.stamp)
                                                                  for i, n in enumerate(t.shape)])
            return shape
        value = t.size(*args[1:], **kwargs)
        dim = args[1] if len(args) == 2 else kwargs.get("dim")
        if type(dim) is not int or not -t.dim() <= dim < t.dim():
            return value
        return size_of(value, self.node_of(t), dim % t.dim(), self.stamp)


def carries_sizes(args, kwargs) -> bool:
    """Does any argument (or any item of a list, tuple or torch.Size argument) carry where it was read?"""
    for value in (*args, *kwargs.values()) if kwargs else args:
        if type(value) in _CARRIERS:
            return True
        if type(value) in _SEQUENCES and any(type(v) in _CARRIERS for v in value):
            return True
    return False


def all_sizes_read(args) -> bool:
    """Was every size of a factory's shape (``*sizes`` or one sequence) read from an axis, or a literal 1?"""
    sizes = args[0] if len(args) == 1 and type(args[0]) in _SEQUENCES else args
    return bool(sizes) and all(type(v) in _CARRIERS or type(v) is int and v == 1 for v in sizes)


_TORCH_SIZE = torch.Size
_SEQUENCES = (tuple, list, torch.Size)
#: the ints a sum with a read size keeps as its terms
_TERMS = (int, SizeOf)
#: the ints that carry where they were read
_CARRIERS = (SizeOf, SizeSum)

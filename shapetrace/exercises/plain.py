"""Values as bounded plain data: a JSON description plus raw bytes (no pickle, no zip, no code).

This is the only way values cross between the checker and its child, in both directions. A tensor is
described by its dtype, shape, stride and storage offset, and carried as the raw bytes of the storage
span it reaches: the reader rebuilds it with ``torch.frombuffer`` and ``as_strided``, after checking
every number against hard caps (dimensions, elements, bytes, dtypes from a fixed list). Nothing is
decompressed and nothing is imported or called by name, so a forged description is refused, never run.

Other values: ``None``, bools, ints (64-bit), floats, short strings, and lists/tuples of these nested
at most :data:`MAX_DEPTH` deep. Anything else is described by its type name only.
"""

from __future__ import annotations

import math

#: dtypes a tensor may have on the wire, with their element sizes.
DTYPES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
          "int8": 1, "uint8": 1, "bool": 1}
MAX_DIMS = 8
MAX_ITEMS = 64  # entries of a list or tuple
MAX_DEPTH = 3
MAX_TEXT = 4000
#: The most bytes one message's tensors may carry (the large memory probe has its own, planned, size).
MAX_TENSOR_BYTES = 8 << 20


class NotPlain(ValueError):
    """A description that is not a value this module writes: refused, never interpreted."""


def _span(shape: list[int], stride: list[int], offset: int) -> int:
    """Elements from the start of the storage to one past the last element the layout reaches."""
    if any(n == 0 for n in shape):
        return offset
    return offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def describe(value, out: list[bytes], depth: int = 0) -> dict:
    """The description of ``value``; tensor bytes are appended to ``out`` (child and parent side)."""
    import torch

    if isinstance(value, torch.Tensor):
        return _describe_tensor(value, out)
    if value is None or type(value) is bool:
        return {"v": value}
    if type(value) is int:
        return {"v": value} if -(1 << 63) <= value < (1 << 63) else {"other": "int"}
    if type(value) is float:
        return {"f": repr(value)}
    if type(value) is str:
        return {"s": value[:MAX_TEXT]}
    if type(value) in (list, tuple) and depth < MAX_DEPTH:
        return {type(value).__name__: [describe(v, out, depth + 1) for v in value[:MAX_ITEMS]]}
    return {"other": type(value).__name__[:100]}


def _describe_tensor(t, out: list[bytes]) -> dict:
    import torch

    t = t.detach()
    if type(t) is not torch.Tensor:
        t = t.as_subclass(torch.Tensor)
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in DTYPES or t.device.type != "cpu" or t.is_sparse or t.dim() > MAX_DIMS:
        return {"other": f"tensor {dtype}"}
    shape, stride, offset = list(t.shape), list(t.stride()), int(t.storage_offset())
    span, size = _span(shape, stride, offset), DTYPES[dtype]
    if (span - offset) * size > MAX_TENSOR_BYTES:
        return {"other": f"tensor {dtype} of {(span - offset) * size} bytes"}
    flat = t.as_strided((span - offset,), (1,), offset) if span > offset else t.new_empty(0)
    raw = flat.contiguous().view(torch.uint8).numpy().tobytes()
    out.append(raw)
    return {"tensor": dtype, "shape": shape, "stride": stride, "offset": 0, "nbytes": len(raw)}


def encode(value) -> tuple[dict, bytes]:
    """``(description, body)`` for ``value``."""
    chunks: list[bytes] = []
    desc = describe(value, chunks)
    return desc, b"".join(chunks)


class _Body:
    def __init__(self, body: bytes, limit: int):
        self.body, self.at, self.limit = memoryview(body), 0, limit

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.body) or self.at + n > self.limit:
            raise NotPlain("a tensor's bytes are missing or over the cap")
        raw = bytes(self.body[self.at:self.at + n])
        self.at += n
        return raw


def _int(x, low: int = 0, high: int = 1 << 40) -> int:
    if type(x) is not int or not low <= x <= high:
        raise NotPlain("a size that is not a bounded whole number")
    return x


def _rebuild_tensor(desc: dict, body: _Body):
    import torch

    dtype = desc.get("tensor")
    if dtype not in DTYPES:
        raise NotPlain("a tensor of an unknown dtype")
    shape, stride = desc.get("shape"), desc.get("stride")
    if not (isinstance(shape, list) and isinstance(stride, list) and len(shape) == len(stride) <= MAX_DIMS):
        raise NotPlain("a tensor without a shape and stride")
    shape = [_int(n, 0, 1 << 31) for n in shape]
    stride = [_int(s, 0, 1 << 40) for s in stride]
    offset = _int(desc.get("offset", 0))
    nbytes = _int(desc.get("nbytes"), 0, body.limit)
    size = DTYPES[dtype]
    if math.prod(shape) * size > body.limit or nbytes % size:
        raise NotPlain("a tensor over the cap")
    if _span(shape, stride, offset) * size > nbytes:
        raise NotPlain("a tensor whose layout reaches past its bytes")
    raw = bytearray(body.take(nbytes))
    dt = getattr(torch, dtype)
    flat = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
    return flat.as_strided(shape, stride, offset)


def decode(desc, body: bytes, limit: int = MAX_TENSOR_BYTES, depth: int = 0):
    """The value a description names; :class:`NotPlain` for anything this module would not write."""
    return _decode(desc, body if isinstance(body, _Body) else _Body(body, limit), depth)


class Unsendable:
    """A value the child could not describe (a module, a function...): its type name only."""

    def __init__(self, type_name: str):
        self.type_name = str(type_name)[:100]

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


def _decode(desc, body: _Body, depth: int):
    if not isinstance(desc, dict) or len(desc) not in range(1, 6):
        raise NotPlain("not a value description")
    if "tensor" in desc:
        return _rebuild_tensor(desc, body)
    if "v" in desc:
        v = desc["v"]
        if v is None or type(v) is bool or (type(v) is int and -(1 << 63) <= v < (1 << 63)):
            return v
        raise NotPlain("not a plain number")
    if "f" in desc:
        text = desc["f"]
        if type(text) is not str or len(text) > 40:
            raise NotPlain("not a float")
        try:
            return float(text)
        except ValueError:
            raise NotPlain("not a float") from None
    if "s" in desc:
        if type(desc["s"]) is not str:
            raise NotPlain("not text")
        return desc["s"][:MAX_TEXT]
    for kind, make in (("list", list), ("tuple", tuple)):
        if kind in desc:
            items = desc[kind]
            if depth >= MAX_DEPTH or not isinstance(items, list) or len(items) > MAX_ITEMS:
                raise NotPlain("a list too long or too deep")
            return make(_decode(d, body, depth + 1) for d in items)
    if "other" in desc and type(desc["other"]) is str:
        return Unsendable(desc["other"])
    raise NotPlain("not a value description")


def pack_frame_body(parts: dict) -> tuple[dict, bytes]:
    """Several named values in one frame: ``({name: description}, body)``."""
    chunks: list[bytes] = []
    descs = {k: describe(v, chunks) for k, v in parts.items()}
    return descs, b"".join(chunks)


def unpack_frame_body(descs, body: bytes, limit: int = MAX_TENSOR_BYTES) -> dict:
    """The named values of :func:`pack_frame_body`, in the same order."""
    if not isinstance(descs, dict):
        raise NotPlain("not a set of values")
    reader = _Body(body, limit)
    return {str(k): _decode(d, reader, 0) for k, d in descs.items()}


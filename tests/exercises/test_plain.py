"""The checker's wire format (:mod:`shapetrace.exercises.plain`, :mod:`shapetrace.exercises.frames`):
values round-trip with their layouts and shared memory; anything it would not write is refused."""

from __future__ import annotations

import json

import pytest
import torch

from shapetrace.exercises.frames import BadFrame, Decoder, encode
from shapetrace.exercises.plain import MAX_TENSOR_BYTES, NotPlain, Unsendable, pack, unpack


def test_values_round_trip_with_strides_offsets_and_shared_memory():
    base = torch.arange(60.0).reshape(3, 4, 5)
    inner = base[:, 1:, 2:]  # (3, 3, 3), not contiguous, at an offset
    out = inner.transpose(0, 2)
    values, facts = unpack(pack({"value": out, "args": [inner, 7, 2.5, "s", None, True]}, {"k": [1]}))
    got, (arg, *rest) = values["value"], values["args"]
    assert torch.equal(got, out) and got.stride() == out.stride() and arg.storage_offset() == inner.storage_offset()
    assert got.untyped_storage().data_ptr() == arg.untyped_storage().data_ptr()  # still a view of the input
    assert rest == [7, 2.5, "s", None, True] and facts == {"k": [1]}


def test_a_copy_does_not_arrive_as_a_view():
    x = torch.arange(6.0)
    values, _ = unpack(pack({"value": x.clone(), "args": [x]}))
    assert values["value"].untyped_storage().data_ptr() != values["args"][0].untyped_storage().data_ptr()


def test_dtypes_devices_sizes_and_complex_numbers_round_trip():
    sent = {"d": torch.bfloat16, "dev": torch.device("cpu"), "size": torch.Size([2, 3]), "c": 1.5 - 2j,
            "nested": [[[[1]]]]}
    values, _ = unpack(pack(sent))
    assert values == sent and type(values["size"]) is torch.Size and type(values["dev"]) is torch.device


def test_sizes_read_while_traced_travel_as_plain_ints():
    """A learner's function runs under the tracer, where ``x.shape[-1]``, ``tuple(x.shape)`` and ``x.size(1)``
    are ints that remember their axis (:class:`~shapetrace.engine.sizes.SizeOf`): they arrive as their values.
    Before: ``x.size(1)`` (and, once shapes carried their axes, ``x.shape[-1]``) arrived as ``<SizeOf>``."""
    import shapetrace

    x = torch.zeros(2, 3, 4)
    with shapetrace.trace():
        sent = {"value": x.shape[-1], "args": [tuple(x.shape), x.size(1), x.shape], "d_k": x.shape[-1] // 2}
    values, _ = unpack(pack(sent))
    assert values == {"value": 4, "args": [(2, 3, 4), 3, torch.Size([2, 3, 4])], "d_k": 2}
    assert type(values["value"]) is int and [type(n) for n in values["args"][0]] == [int, int, int]
    assert type(values["d_k"]) is int   # (a quotient of a read size, SizeQuot, travels as its value too)


def test_other_objects_travel_as_their_type_name_only():
    values, _ = unpack(pack({"value": object(), "f": len}))
    assert isinstance(values["value"], Unsendable) and repr(values["f"]) == "<builtin_function_or_method>"


class _ClaimsTensor:
    """isinstance() says torch.Tensor (a ``__class__`` property), and detach() hands back itself: a learner's
    object returned as a grad (tests/hostile/grads_class_says_tensor.py). Before, packing it raised in the
    child, and the verdict said the process ended "before your function returned"."""

    __class__ = property(lambda self: torch.Tensor)

    def detach(self):
        return self


def test_a_tensor_the_child_cannot_send_says_why_and_a_false_tensor_is_its_type_name():
    from shapetrace.exercises.judge import READS, unread_tensor

    big = torch.zeros(MAX_TENSOR_BYTES // 4 + 1)
    sent = {"meta": torch.empty(2, 3, device="meta"), "complex": torch.zeros(2, dtype=torch.complex64),
            "big": big[:4], "nine": torch.zeros([1] * 9), "fake": _ClaimsTensor()}
    values, _ = unpack(pack(sent))
    assert {k: repr(v) for k, v in values.items()} == {
        "meta": "<tensor float32 on the meta device>", "complex": "<tensor complex64>",
        "big": f"<tensor float32 of {MAX_TENSOR_BYTES + 4} bytes>", "nine": "<tensor float32 of 9 axes, strided>",
        "fake": "<_ClaimsTensor>"}
    assert [unread_tensor(v) for v in values.values()] == [
        "float32 tensor on the meta device", "complex64 tensor", f"float32 tensor of {MAX_TENSOR_BYTES + 4} bytes",
        "float32 tensor of 9 axes, strided", ""]
    assert READS == ("it reads back strided CPU tensors of float, int or bool dtypes, with up to 8 axes and 8 MiB "
                     "of memory in all")


def test_a_single_grad_on_the_meta_device_is_told_so_not_called_no_tensor():
    """transpose-grad returns one tensor: before, "your function returned a tensor of shape [...], not a tensor"."""
    import random

    from shapetrace.exercises import inputs as inp
    from shapetrace.exercises.content import load
    from shapetrace.exercises.judge import Judge, Learned

    ex = load().exercise("transpose-grad")
    case = inp.draw(ex.inputs, random.Random(0))[0]
    value = unpack(pack({"v": torch.empty(2, device="meta")}))[0]["v"]
    v = Judge(ex, "learner.py", [case]).case(case, Learned(value=value, args=case.fresh(),
                                                           facts={"short": "a tensor of shape [2]"}))
    assert (v.verdict, v.summary) == ("not-a-tensor", "your function returned a float32 tensor on the meta device, "
                                      "which the checker cannot read back: it reads back strided CPU tensors of "
                                      "float, int or bool dtypes, with up to 8 axes and 8 MiB of memory in all")


def _forged(values: dict, storages: list[int], body: bytes = b"") -> bytes:
    text = json.dumps({"values": values, "storages": storages, "facts": {}}).encode()
    return len(text).to_bytes(4, "big") + text + body


@pytest.mark.parametrize("desc, storages, body, why", [
    ({"tensor": "float32", "shape": [4], "stride": [1], "offset": 0, "storage": 0}, [8], b"\0" * 8, "reaches past"),
    ({"tensor": "float32", "shape": [2], "stride": [-1], "offset": 1, "storage": 0}, [8], b"\0" * 8, "bounded"),
    ({"tensor": "object", "shape": [1], "stride": [1], "offset": 0, "storage": 0}, [8], b"\0" * 8, "unknown dtype"),
    ({"tensor": "float32", "shape": [1], "stride": [1], "offset": 0, "storage": 3}, [8], b"\0" * 8, "bounded"),
    ({"v": 1 << 70}, [], b"", "not a plain number"),
    ({"f": "1" * 100}, [], b"", "not a float"),
    ({"list": [{"list": [{"list": [{"list": [{"list": []}]}]}]}]}, [], b"", "too deep"),
    ({"dtype": "object"}, [], b"", "unknown name"),
    ({"device": "cpu; import os"}, [], b"", "not a device"),
    ({"size": [1 << 50]}, [], b"", "bounded"),
    ({"c": ["1", "x"]}, [], b"", "not a float"),
    ({"v": 1}, [MAX_TENSOR_BYTES + 1], b"", "bounded"),
    ({"v": 1}, [4], b"\0" * 3, "missing"),
    # sizes each within bounds whose product torch cannot count: as_strided raised RuntimeError in the
    # parent (an internal error, no verdict), as a forged case frame of tests/hostile/huge_numel_frame.py did
    ({"tensor": "float32", "shape": [1 << 31] * 4, "stride": [0] * 4, "offset": 0, "storage": 0}, [4], b"\0" * 4,
     "more elements than torch can count"),
    ({"tensor": "uint8", "shape": [1 << 31] * 2 + [2], "stride": [0] * 3, "offset": 0, "storage": 0}, [1], b"\0",
     "more elements than torch can count"),
    # a dtype that is a list or an object: looked up in the table of dtypes, it raised TypeError (unhashable)
    ({"tensor": [1, 2], "shape": [1], "stride": [1], "offset": 0, "storage": 0}, [4], b"\0" * 4, "unknown dtype"),
    ({"tensor": {}, "shape": [1], "stride": [1], "offset": 0, "storage": 0}, [4], b"\0" * 4, "unknown dtype"),
    ({"dtype": ["float32"]}, [], b"", "unknown name"),
])
def test_forged_descriptions_are_refused(desc, storages, body, why):
    with pytest.raises(NotPlain, match=why):
        unpack(_forged({"value": desc}, storages, body))


def test_the_largest_count_torch_holds_still_arrives():
    """The twin of the refusals above: 2**31 · 2**31 elements on one byte (a legal expand) is rebuilt."""
    desc = {"tensor": "uint8", "shape": [1 << 31, 1 << 31], "stride": [0, 0], "offset": 0, "storage": 0}
    values, _ = unpack(_forged({"value": desc}, [1], b"\7"))
    assert values["value"].shape == (1 << 31, 1 << 31) and values["value"].stride() == (0, 0)


@pytest.mark.parametrize("header, why", [
    # a case numbered 0.0: "0.0 in range(n)" held, then cases[0.0] raised TypeError in the parent (an
    # internal error), as tests/hostile/float_case_frame.py did
    ({"kind": "case", "case": 0.0}, "the header: case is a float"),
    ({"kind": "case", "case": True}, "the header: case is a bool"),
    ({"kind": ["case"], "case": 0}, "the header: kind is a list"),
    ({"kind": "probe", "case": 0, "raw": 1}, "the header: raw is a int"),
    ({"kind": "probe", "case": 0, "shape": [2, "x"], "dtype": "float32"}, "the header's shape holds"),
    ({"kind": "probe", "case": 0, "dtype": ["float32"]}, "the header: dtype is a list"),
])
def test_a_header_whose_fields_have_other_types_than_the_child_writes_is_refused(header, why):
    with pytest.raises(BadFrame, match=why):
        list(Decoder().feed(encode(header)))


def test_the_headers_the_child_writes_are_read():
    """The twins: every field with its own type (None is a field the child left out)."""
    headers = [{"kind": "ready", "missing": []}, {"kind": "case", "case": 2}, {"kind": "call", "n": 7},
               {"kind": "probe", "case": 0, "raw": True, "shape": [2, 3], "dtype": "float32"},
               {"kind": "probe", "case": 0, "raw": False, "shape": None}]
    assert [f.header for f in Decoder().feed(b"".join(encode(h) for h in headers))] == headers


def test_a_frame_over_the_cap_is_refused_from_its_length():
    frame = encode({"kind": "case"}, b"x" * 100)
    with pytest.raises(BadFrame, match="a frame of 100 bytes"):
        list(Decoder(max_body=99).feed(frame[:40]))  # refused before the body arrives
    assert list(Decoder(max_body=100).feed(frame))[0].body == b"x" * 100


def test_good_frames_before_a_bad_one_in_the_same_read_still_come_out():
    """A learner's forged frame can arrive in the same read as the child's own "ready": the parent must
    still see "ready" (and so call the run a crash of the learner's file, not a checker that never started)."""
    good, bad = encode({"kind": "ready"}, b""), encode({"kind": "case"}, b"")[:-8] + (1 << 30).to_bytes(8, "big")
    seen = []
    with pytest.raises(BadFrame, match="a frame of 1073741824 bytes"):
        for frame in Decoder(max_body=100).feed(good + bad):
            seen.append(frame.header)
    assert seen == [{"kind": "ready"}]

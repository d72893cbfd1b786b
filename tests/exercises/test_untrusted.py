"""shapetrace.exercises.untrusted: learner data is parsed within bounds, typed, and cleaned where it enters.

The escape sequences below are the ones terminal-injection reports use (a cleared screen, a cursor moved
up over the real verdict, a green ``✓ pass``, an OSC 8 hyperlink, the bidi override of CVE-2021-42574).
"""

from __future__ import annotations

import json
import struct
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shapetrace.exercises.frames import MAGIC, BadFrame, Decoder, encode
from shapetrace.exercises.plain import NotPlain, unpack
from shapetrace.exercises.untrusted import MAX_DEPTH, Unreadable, checked_facts, clean, clean_tree, loads

FAKE_PASS = "\x1b[2J\x1b[H\x1b[1A\x1b[32m✓ pass\x1b[0m"


@pytest.mark.parametrize(("text", "shown"), [
    (FAKE_PASS, "✓ pass"),
    ("\x1b]8;;https://example.invalid\x1b\\click\x1b]8;;\x1b\\", "click"),     # OSC 8, ended by ST
    ("\x1b]8;;https://example.invalid\x07click\x1b]8;;\x07", "click"),         # OSC 8, ended by BEL
    ("\x1b]0;new title\x07x", "x"),                                             # the window title
    ("\x1bc\x1b7\x1b8\x1b(Bx", "x"),                                            # reset, save, restore, charset
    ("\x9b31mred\x9b0m", "red"),                                                # 8-bit CSI
    ("\x1bP1$r\x1b\\x", "x"),                                                   # a device control string
    ("access\u202e\u2066 denied\u2069\u202c", "access denied"),                # bidi override and isolate
    ("fail\r✓ pass", "fail\n✓ pass"),                                           # a carriage return overwrites
    ("a\r\nb", "a\nb"),
    ("zero\u200bwidth\ufeff", "zerowidth"),
    ("bell\x07 null\x00 del\x7f", "bell null del"),
    ("line\u2028next\u2029", "line\nnext\n"),
    ("lone \ud800 surrogate", "lone \ufffd surrogate"),
    ("tab\tand\nnewline stay; so does ünïcödé and 中文", "tab\tand\nnewline stay; so does ünïcödé and 中文"),
    ("plain ASCII, [brackets] and 100%", "plain ASCII, [brackets] and 100%"),
])
def test_clean_removes_what_a_terminal_would_act_on(text, shown):
    assert clean(text) == shown


_KEPT = {"\n", "\t"}


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=80))
def test_clean_leaves_no_control_format_or_surrogate_character_and_is_stable(text):
    out = clean(text)
    assert all(ch in _KEPT or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp") for ch in out)
    assert clean(out) == out
    out.encode("utf-8")  # every encoder can write it


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=80),
       st.text(alphabet="─│┌┐└┘├┤┬┴┼ ab·→✓✗×…\n\t", max_size=80))
def test_the_printable_shortcut_keeps_exactly_what_the_character_pass_keeps(any_text, table_text):
    """A text ``str.isprintable`` passes (a traced table: box drawing, arrows, ticks) comes back whole
    without the per-character pass; every other text gets that pass, so both ways give the same text."""
    from shapetrace.exercises.untrusted import _each_character

    for text in (table_text, any_text, table_text + any_text):
        cleaned = clean(text)
        assert cleaned == _each_character(clean_escapes_only(text))
    assert clean(table_text) == table_text


def clean_escapes_only(text: str) -> str:
    """What :func:`clean` does before its character pass (sequences, carriage returns, separators)."""
    from shapetrace.exercises.untrusted import _CONTROLS, _SEPARATORS, _SEQUENCES

    text = _SEQUENCES.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return _SEPARATORS.sub("\n", _CONTROLS.sub("", text))


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=80))
def test_printable_ascii_is_never_changed(text):
    assert clean(text) == text


def test_loads_cleans_every_string_and_key_and_caps_the_depth():
    data = json.dumps({FAKE_PASS: [FAKE_PASS, {"k": "\u202eok"}], "n": 3}).encode()
    assert loads(data) == {"✓ pass": ["✓ pass", {"k": "ok"}], "n": 3}
    assert loads(b"[" * 4 + b"]" * 4, max_depth=4) == [[[[]]]]
    with pytest.raises(Unreadable, match="nested too deep"):
        loads(b"[" * 5 + b"]" * 5, max_depth=4)
    with pytest.raises(Unreadable, match="not JSON"):   # past json's own guard: RecursionError, caught
        loads(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(Unreadable, match="not JSON"):
        loads(b"{nope")
    with pytest.raises(Unreadable):
        clean_tree([[[]]], max_depth=2)


def _frame(header_text: bytes) -> bytes:
    return MAGIC + struct.pack(">I", len(header_text)) + header_text + struct.pack(">Q", 0)


def test_a_4_kib_header_of_nested_arrays_is_a_bad_frame_not_a_recursion_error():
    with pytest.raises(BadFrame, match="header"):
        list(Decoder().feed(_frame(b"[" * 2040 + b"]" * 2040)))
    with pytest.raises(BadFrame, match="nested too deep"):
        list(Decoder().feed(_frame(b'{"kind": [[[["x"]]]]}')))
    frame = next(Decoder().feed(encode({"kind": "ready", "missing": [FAKE_PASS]})))
    assert frame.header == {"kind": "ready", "missing": ["✓ pass"]}


def test_a_message_nested_past_the_cap_is_not_plain_and_its_text_is_clean():
    head = json.dumps({"values": {"v": {"s": FAKE_PASS}, "t": {"other": "\x1b[2Jtype"}},
                       "storages": [], "facts": {"output": FAKE_PASS}}).encode()
    values, facts = unpack(len(head).to_bytes(4, "big") + head)
    assert values["v"] == "✓ pass" and repr(values["t"]) == "<type>" and facts == {"output": "✓ pass"}
    deep = json.dumps({"values": {}, "storages": [], "facts": {"x": json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)}})
    with pytest.raises(NotPlain, match="nested too deep"):
        unpack(len(deep).to_bytes(4, "big") + deep.encode())


GOOD_FACTS = {"exc": {"type": "ValueError", "mro": ["ValueError", "Exception"], "message": "m", "timed_out": False},
              "frame": [3, "x = 1"], "output": "", "output_total": 0, "short": "a tensor", "type": "Tensor",
              "alloc_bytes": None, "events": [{"index": 0, "op": "view", "shape": [2, 3], "dims": ["B", None],
                                               "error": False, "args": [[2, 3]], "inputs": [[6]], "source": "f.py:3",
                                               "code": "x.view(2, 3)"}],
              "diagnostics": [{"severity": "error", "kind": "k", "event": 0, "message": "m", "fix": ""}],
              "crash_lines": [], "copies": ["  f.py: `x` copied 4 B"], "allocs": [], "in_place": [None, ""],
              "table": "", "swapped": [], "returned": None}


def test_the_facts_the_child_writes_are_accepted():
    assert checked_facts(GOOD_FACTS) is GOOD_FACTS
    assert checked_facts({}) == {} and checked_facts({"unknown": [1, {"x": 2}]}) == {"unknown": [1, {"x": 2}]}


@pytest.mark.parametrize(("key", "value"), [
    ("output_total", "lots"), ("output_total", True), ("output", ["x"]), ("exc", "ValueError"),
    ("exc", {"type": "E", "mro": "E"}), ("exc", {"mro": [["E"]]}), ("exc", {"timed_out": "yes"}),
    ("frame", [1]), ("frame", ["1", "x"]), ("in_place", [1, 2]), ("in_place", {"a": 1}),
    ("events", "view"), ("events", [{"index": [0]}]), ("events", [3]),
    ("diagnostics", [{"event": [1], "message": "m"}]), ("diagnostics", [{"message": 3}]),
    ("crash_lines", [1]), ("copies", 5), ("swapped", ["0"]), ("alloc_bytes", 1.5), ("table", 0),
])
def test_a_fact_of_another_type_is_unreadable(key, value):
    with pytest.raises(Unreadable):
        checked_facts(dict(GOOD_FACTS, **{key: value}))
    with pytest.raises(Unreadable):
        checked_facts([GOOD_FACTS])

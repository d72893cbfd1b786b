"""--export: every format for the default config, parsed; the HTML rendered in headless chromium."""

from __future__ import annotations

import struct
import subprocess
import tempfile
import xml.etree.ElementTree as ET
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import OUTPUT, cli_forked, cli_in_process, render, require_tool

EXPECTED_SHAPES = {  # index -> shape with names, as torch and the namer give it for B=2 T=6 D=512 H=8
    0: "[B=2, T=6, D=512]", 1: "[B=2, T=6, H=8, d_k=64]", 2: "[B=2, H=8, T=6, d_k=64]",
    9: "[B=2, H=8, d_k=64, T=6]", 10: "[B=2, H=8, T=6, T=6]", 14: "[B=2, T=6, H=8, d_k=64]",
    15: "[B=2, T=6, D=512]",
}


@pytest.fixture(scope="module")
def trace():
    """The reference run's report, with the header ``shapetrace run`` shows above its table."""
    from shapetrace.app.session import run_reference
    from shapetrace.attention.config import AttentionConfig

    return run_reference(AttentionConfig()).report()


def _export(trace, tmp_path, name, **kw):
    from shapetrace.render.export import export_trace

    return export_trace(trace, tmp_path / name, **kw).read_text(encoding="utf-8")


def test_svg_is_xml_with_every_op(trace, tmp_path):
    root = ET.fromstring(_export(trace, tmp_path, "t.svg"))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    text = "".join(root.itertext()).replace("\xa0", " ")
    for shape in EXPECTED_SHAPES.values():
        assert shape in text
    assert "(3072, 64, 512, 1)" in text and "copy 24 KiB" in text
    assert "17 ops · 9 views · 4 copies (96 KiB)" in text


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_static_html_parses_and_light_theme_is_white(trace, tmp_path):
    page = _export(trace, tmp_path, "t.html", theme="light", static=True)
    parser = _Collect()
    parser.feed(page)
    assert {"html", "head", "title", "body", "pre", "code"} <= set(parser.tags)
    text = "".join(parser.text)
    assert "shapetrace · multi-head self-attention · B=2 T=6 D=512 H=8" in text
    for shape in EXPECTED_SHAPES.values():
        assert shape in text
    assert "background-color: #ffffff;" in page
    dark = _export(trace, tmp_path, "d.html", theme="dark", static=True)
    assert "background-color: #0c0c0c;" in dark and "#ffffff;" not in dark.split("body {")[1]


def _md_cells(row: str) -> list[str]:
    import re

    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def test_markdown_table_rows_match_the_trace(trace, tmp_path):
    md = _export(trace, tmp_path, "t.md")
    lines = md.splitlines()
    assert lines[0] == "### shapetrace · multi-head self-attention · B=2 T=6 D=512 H=8"
    head = lines.index("| # | op | code | shape [names] | strides | memory | layout | annotation |")
    assert lines[head + 1] == "|---:|---|---|---|---|---|---|---|"
    rows = [_md_cells(line) for line in lines[head + 2: head + 2 + len(trace.events)]]
    assert len(rows) == 17 and all(len(r) == 8 for r in rows)
    for e, row in zip(trace.events, rows):
        assert row[0] == str(e.index) and row[1] == f"`{e.op}`"
        assert row[4] == "(" + ", ".join(map(str, e.output.stride)) + ")"
        assert row[6] == ("contiguous" if e.output.contiguous else "strided")
    assert "✗" not in md  # ✗ marks errors only; a correct run has none
    assert rows[10][7].startswith("`q @ k_t: [B, H, T, d_k] @ [B, H, d_k, T] -> [B, H, T, T]`; ")
    assert rows[12][7].startswith("`weights @ v: [B, H, T, T] @ [B, H, T, d_k] -> [B, H, T, d_k]`; ")
    for i, shape in EXPECTED_SHAPES.items():
        assert rows[i][3] == shape
    assert rows[2][2] == "`return x.transpose(1, 2)`"
    assert rows[14][5] == "**copy 24 KiB**" and rows[15][5] == "view" and rows[10][5] == "new 2.2 KiB"
    assert lines[head + 2 + 17] == ""
    assert "17 ops · 9 views · 4 copies (96 KiB) · 7 computed buffers (124 KiB)  " in lines
    assert lines[-1] == ("**✓ checked all 16 ops that could carry a layout bug: every axis keeps its meaning from "
                         "input to output; held on the values: batch entries stay apart, each token depends on "
                         "itself, heads stay apart**")


def test_markdown_escapes_pipes_in_code():
    from shapetrace.render.export import _md_cell, _md_code

    assert _md_code("y = a | b  # (B, T)") == "`y = a \\| b`"
    assert _md_cell("x|y") == "x\\|y"


def test_txt_is_exactly_the_terminal_table(trace, tmp_path):
    from shapetrace.render.classroom import ClassroomView

    assert _export(trace, tmp_path, "t.txt") == render(ClassroomView(trace), width=100)


def test_export_respects_readability_options(trace, tmp_path):
    from shapetrace.app.classroom import ViewOptions

    opts = ViewOptions(compact=True, explain="brief", long_names=True)
    txt = _export(trace, tmp_path, "c.txt", options=opts)
    assert "  # op          shape [names]                             memory" in txt
    assert "[batch=2, heads=8, seq_len=6, d_head=64]" in txt and "(3072, 64, 512, 1)" not in txt
    assert "swap heads↔seq_len · view · non-contiguous" in txt
    md = _export(trace, tmp_path, "c.md", options=opts)
    assert "| 15 | `view` | `return x.view(B, T, H * d_k)` | [batch=2, seq_len=6, d_model=512] |" in md
    assert "heads×d_head → d_model · view" in md


def _first_pixel(png: bytes) -> tuple[int, int, int]:
    """RGB of the top-left pixel: on the first row every PNG filter leaves the first pixel as stored."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8: pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompressobj().decompress(idat, 16)
    return tuple(raw[1:4])


def _png_size(png: bytes) -> tuple[int, int]:
    return struct.unpack(">II", png[16:24])


def screenshot(html: Path, png: Path) -> bytes:
    """Render an HTML file in real headless chromium (Debian's package) and return the PNG."""
    chromium = require_tool("chromium")
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1200,2000",
             html.resolve().as_uri()], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert png.exists(), proc.stderr[-2000:]
    return png.read_bytes()


@pytest.mark.parametrize("theme, background", [("light", (255, 255, 255)), ("dark", (12, 12, 12))])
def test_html_renders_in_headless_chromium(trace, theme, background):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    from shapetrace.render.export import export_trace

    html = export_trace(trace, OUTPUT / f"trace-{theme}.html", theme=theme, force=True)
    png = screenshot(html, OUTPUT / ("trace.png" if theme == "light" else "trace-dark.png"))
    assert _png_size(png) == (1200, 2000)
    assert _first_pixel(png) == background
    assert len(png) > 50_000  # a page of coloured text, not a blank image


def test_cli_export_writes_file_and_still_prints_table(tmp_path):
    out = tmp_path / "trace.md"
    proc = cli_in_process("run", "--export", str(out), "--theme", "dark")
    assert proc.returncode == 0, proc.stderr
    assert "17 ops · 9 views" in proc.stdout
    assert proc.stderr.strip() == f"exported to {out}"
    assert out.read_text().count("\n| ") == 18


@pytest.mark.parametrize("args, message", [
    (["--export", "slides.pdf"], "error: --export slides.pdf: unknown format (.pdf)"),
    (["--export", "t.svg", "--theme", "sepia"], "error: --theme 'sepia': choose one of dark, light"),
    (["--explain", "medium"], "error: --explain 'medium': choose one of full, brief"),
])
def test_bad_export_options_exit_2_with_one_line(cli, args, message):
    result = cli("run", *args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_export_refuses_an_existing_file_unless_forced(tmp_path):
    out = tmp_path / "notes.md"
    out.write_text("my notes\n")
    proc = cli_in_process("run", "--export", str(out))
    assert proc.returncode == 2 and proc.stdout == ""  # refused before anything was traced or printed
    assert " ".join(proc.stderr.split()) == (f"error: --export {out}: a file with that name exists; "
                                              "add --force to replace it")
    assert out.read_text() == "my notes\n"
    proc = cli_in_process("run", "--export", str(out), "--force")
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("### shapetrace")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.md"]  # no temporary file left behind


def test_export_never_writes_through_a_symlink(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    link = tmp_path / "trace.md"
    link.symlink_to(precious)
    proc = cli_in_process("run", "--export", str(link))
    assert proc.returncode == 2 and "a symbolic link with that name exists" in proc.stderr
    proc = cli_in_process("run", "--export", str(link), "--force")
    assert proc.returncode == 0, proc.stderr
    assert precious.read_text() == "keep me\n"  # the link was replaced, not the file it pointed at
    assert not link.is_symlink() and link.read_text().startswith("### shapetrace")


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing" / "t.md", "the folder {d}/missing does not exist"),
    (lambda d: d, "that is a folder; give a file name"),
])
def test_export_path_problems_are_found_before_tracing(tmp_path, make, message):
    target = make(tmp_path)
    if target == tmp_path:
        target = tmp_path / "dir.md"
        target.mkdir()
    script = tmp_path / "marks.py"
    script.write_text(f"import torch\nopen({str(tmp_path / 'ran')!r}, 'w').close()\nx = torch.ones(2, 3).t()\n")
    proc = cli_forked("trace", str(script), "--export", str(target))
    assert proc.returncode == 2 and proc.stdout == ""
    assert not (tmp_path / "ran").exists()  # refused before the script ran
    assert message.format(d=tmp_path) in " ".join(proc.stderr.split())


def test_force_needs_export(cli):
    result = cli("run", "--force")
    assert result.exit_code == 2 and "--force only works with --export PATH" in result.output

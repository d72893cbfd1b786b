"""The interactive classroom page: ``--export trace.html``.

One self-contained file (no network, no external script or font): the arrow keys and space step
through the ops; each step highlights the line of code that ran, and shows the op's row, every
input (both operands of a matmul, named), its sentence and its memory diagram. Light and dark
themes (``t`` switches), large type for a projector. The data is computed here, in Python, and
embedded as JSON; the page's script only shows it (all text goes in with ``textContent``).
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any

from rich.console import Console

from shapetrace.app.classroom import ViewOptions, names_for, spell_long
from shapetrace.app.layers import layered
from shapetrace.app.operands import equation, input_labels, is_matmul
from shapetrace.app.strip import repeat_of, strip_nodes
from shapetrace.engine.formatting import fmt_shape
from shapetrace.engine.sentences import annotate, memory_word
from shapetrace.render.source import read_lines, resolve_path, split_source
from shapetrace.render.table import SEVERITY_MARK, footer_text, setup_line, trace_header, verdict_text
from shapetrace.render.wrap import glued as _glued

if TYPE_CHECKING:  # pragma: no cover
    from rich.terminal_theme import TerminalTheme

    from shapetrace.engine.events import Event
    from shapetrace.engine.report import Report

#: The diagram's columns: at the smallest page font (14 px of a monospace, 0.6 em a column) 64 columns
#: take 539 px, which the op panel holds at a 1024 px window (546 px); the CSS caps the font so the rows fit
#: a narrower panel too (a zoomed page, a window between 900 and 1024 px).
DIAGRAM_WIDTH = 64
MAX_FILE_LINES = 3000


def _tuple(values) -> str:
    return "(" + ", ".join(map(str, values)) + ")"


def _diagram_html(event: Event, heads: int | None, theme: TerminalTheme, theme_name: str = "light") -> str:
    """The op's memory diagram as a <pre> fragment with inline colours ("" when it has none)."""
    from shapetrace.render.diagram import event_diagram
    from shapetrace.render.themes import readable_segments

    if event.output is None and not event.error:
        return ""
    console = Console(record=True, file=io.StringIO(), width=DIAGRAM_WIDTH, force_terminal=True,
                      color_system="truecolor", legacy_windows=False)
    try:
        console.print(readable_segments(console, event_diagram(event, DIAGRAM_WIDTH, heads), theme_name))
    except Exception as exc:  # a diagram bug must not cost the class its page
        return f"<pre class=\"diagram\">memory diagram failed: {type(exc).__name__}</pre>"
    return console.export_html(theme=theme, inline_styles=True, code_format="<pre class=\"diagram\">{code}</pre>")


class DiagramPool:
    """Each distinct diagram once: ops refer to it by number (k's and v's split draw what q's did)."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._numbers: dict[str, int] = {}

    def add(self, html: str) -> int:
        if html not in self._numbers:
            self._numbers[html] = len(self.items)
            self.items.append(html)
        return self._numbers[html]


def _op(event: Event, trace: Report, long_names, themes: dict[str, TerminalTheme], pool: DiagramPool) -> dict[str, Any]:
    """Everything one step of the page shows about one op."""
    heads = trace.dims.get("H") if trace.dims else None
    path, line = split_source(event.source or "")
    o = event.output
    mine = [d for d in trace.diagnostics if d.event == event.index]
    notes = [f"{SEVERITY_MARK[d.severity]} {d.kind}: {d.text}" for d in mine]
    wrong = bool(event.error) or any(d.severity == "error" for d in mine)
    return {
        "index": event.index, "op": event.op, "code": event.code.split("  #")[0].strip(),
        "file": path, "line": line, "where": f"{path.rsplit('/', 1)[-1]}:{line}" if line else path,
        "shape": fmt_shape(o, long_names) if o else "", "strides": _tuple(o.stride) if o else "",
        "memory": memory_word(event), "layout": ("contiguous" if o.contiguous else "strided") if o else "",
        "equation": _glued(equation(event)) if is_matmul(event) else "",
        "inputs": [[label, _glued(fmt_shape(t, long_names)), _glued(_tuple(t.stride))]
                   for label, t in zip(input_labels(event), event.inputs)],
        "sentence": _glued(spell_long(annotate(event, "full"), long_names)),
        "error": event.error or "", "notes": notes, "wrong": wrong,
        "module": event.module,
        "diagram": {name: pool.add(_diagram_html(event, heads, theme, name)) for name, theme in themes.items()},
    }


def _files(events) -> dict[str, list[str]]:
    """The source lines of every file an op was written in (what the code panel shows)."""
    out: dict[str, list[str]] = {}
    for e in events:
        path, _ = split_source(e.source or "")
        if path in out or not path:
            continue
        real = resolve_path(path)
        try:
            out[path] = list(read_lines(real))[:MAX_FILE_LINES] if real else []
        except (OSError, UnicodeDecodeError):
            out[path] = []
    return out


def page_data(trace: Report, options: ViewOptions = ViewOptions(), doubled=None) -> dict[str, Any]:
    """The page's data: header, every op, the source files, footer and diagnostics; the backward's rows
    and what autograd keeps when it was traced (:mod:`.page_backward`; ``doubled``: the same at 2T)."""
    from shapetrace.render.page_backward import backward_data
    from shapetrace.render.themes import TERMINAL_THEMES

    long_names = names_for(trace, options)
    header = trace_header(trace) or ["shapetrace"]
    def said(d):
        return (f"{SEVERITY_MARK[d.severity]} {d.kind}" + (f" at #{d.event}" if d.event is not None else "")
                + f": {d.text}")

    # the errors and warnings, the one verdict line, then the notes under it
    summary = [said(d) for d in trace.diagnostics if d.severity != "note"]
    summary += [verdict_text(trace), *(said(d) for d in trace.diagnostics if d.severity == "note")]
    events = trace.events
    diagnosed = {d.event for d in trace.diagnostics if d.event is not None}
    shared = repeat_of(events, diagnosed)  # a folded layer's ops, a loop's iterations: their data once
    pool = DiagramPool()
    ops = [{"index": e.index, "same": shared[i], "module": e.module} if i in shared
           else _op(e, trace, long_names, TERMINAL_THEMES, pool) for i, e in enumerate(events)]
    return {
        "title": header[0], "header": [*header[1:], *filter(None, [setup_line(trace)])], "ops": ops,
        "diagrams": pool.items,
        "strip": strip_nodes(events, diagnosed), "layered": layered(events),
        "files": _files(events),
        "footer": footer_text(trace, events, setup_shown=True).plain.splitlines(), "summary": summary,
        "backward": backward_data(trace, options, doubled),
    }


def interactive_page(trace: Report, options: ViewOptions = ViewOptions(), theme: str = "light",
                     doubled=None) -> str:
    """The whole self-contained HTML page."""
    from html import escape

    data = json.dumps(page_data(trace, options, doubled), ensure_ascii=False)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    title = escape(trace_header(trace)[0] if trace_header(trace) else "shapetrace")
    return (PAGE.replace("{{TITLE}}", title).replace("{{THEME}}", "dark" if theme == "dark" else "light")
            .replace("{{CSS}}", CSS).replace("{{SCRIPT}}", SCRIPT).replace("{{DATA}}", data))


PAGE = """<!DOCTYPE html>
<html lang="en" data-theme="{{THEME}}">
<head>
<meta charset="UTF-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{TITLE}}</title>
<style>{{CSS}}</style>
</head>
<body>
<header>
  <h1 id="title"></h1>
  <div id="header"></div>
</header>
<main>
  <section id="code-panel" aria-label="source code">
    <div id="file" class="dim"></div>
    <pre id="code"></pre>
  </section>
  <section id="op-panel" aria-live="polite">
    <div id="position" class="dim"></div>
    <div id="row-box"><table id="row"><thead><tr><th>#</th><th>op</th><th>shape [names]</th><th>strides</th>
      <th>memory</th><th>layout</th></tr></thead><tbody><tr id="row-cells"></tr></tbody></table></div>
    <div id="grad"></div>
    <div id="inputs"></div>
    <div id="equation"></div>
    <p id="sentence"></p>
    <div id="notes"></div>
    <div id="diagram"></div>
    <div id="summary"></div>
    <div id="saved"></div>
  </section>
</main>
<nav id="strip" aria-label="every op"></nav>
<footer class="dim">→ / Space next · ← back · Home / End · t light/dark · + / - text size · click an op to jump,
  a layer to open it</footer>
<script type="application/json" id="trace-data">{{DATA}}</script>
<script>{{SCRIPT}}</script>
</body>
</html>
"""

#: The page is one column of boxes that share the window: the header and footer take what they need,
#: the strip at most 22% of the height, 180 px (it scrolls inside), and the code and op panels the rest
#: (each scrolls inside). Nothing is fixed over anything else, so no zoom or window size hides a row.
CSS = """
:root { --bg: #ffffff; --fg: #1e1e1e; --dim: #5a5a5a; --panel: #f3f3f3; --line: #fff0a8; --accent: #0b57d0;
  --op: #8e24aa; --good: #1b7a1b; --strided: #00707f; --bad: #b3261e; --chip: #e6e6e6; --border: #cfcfcf;
  color-scheme: light; }
[data-theme="dark"] { --bg: #0c0c0c; --fg: #e8e8e8; --dim: #a8a8a8; --panel: #1b1b1b; --line: #423900;
  --accent: #8ab4f8; --op: #e39cf0; --good: #7bd88f; --strided: #5fd7e6; --bad: #ff8a80; --chip: #2a2a2a;
  --border: #3a3a3a; color-scheme: dark; }
* { box-sizing: border-box; }
html, body { margin: 0; background: var(--bg); color: var(--fg); height: 100%; }
body { font: clamp(16px, 1.6vw, 22px)/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  padding: 12px 24px 0; display: flex; flex-direction: column; overflow: hidden; }
pre, code, #row, #inputs, #equation, #strip, #grad .cells, #grad .made, .mono {
  font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
header { flex: none; }
h1 { font-size: clamp(20px, 2vw, 28px); margin: 0 0 2px; }
.dim, #header { color: var(--dim); }
#header div { font-size: clamp(14px, 1.3vw, 18px); }
main { flex: 1 1 auto; min-height: 0; display: grid; grid-template-columns: minmax(0, 0.8fr) minmax(0, 1.2fr);
  grid-template-rows: minmax(0, 1fr); gap: 16px; margin: 10px 0; }
#code-panel, #op-panel { background: var(--panel); border: 1px solid var(--border); border-radius: 8px;
  padding: 10px 14px; min-width: 0; min-height: 0; overflow: auto; }
#code { margin: 6px 0 0; font-size: clamp(14px, 1.25vw, 21px); line-height: 1.5; }
#code > div { display: flex; align-items: baseline; }
#code .ln { color: var(--dim); flex: none; width: 3.2em; text-align: right; margin-right: 0.8em; }
#code .src { flex: 1; min-width: 0; white-space: pre-wrap; overflow-wrap: anywhere; text-indent: -2ch; }
#code .shape { display: inline-block; text-indent: 0; }
#code .cur { background: var(--line); font-weight: 700; border-radius: 4px; }
#code .cur .ln::before { content: "▶ "; }
#row thead { display: none; }
#row, #row tbody { display: block; }
#row { font-size: clamp(14px, 1.1vw, 21px); margin: 6px 0 10px; }
#row-cells { display: flex; flex-wrap: wrap; gap: 2px 18px; }
#row td { display: block; padding: 0; white-space: nowrap; }
#row td::before { content: attr(data-label); display: block; color: var(--dim); font-weight: 600; font-size: 14px;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
#row .op { color: var(--op); font-weight: 700; }
.arrow { white-space: nowrap; }
.contiguous { color: var(--good); } .strided { color: var(--strided); } .raised { color: var(--bad); font-weight: 700; }
#inputs div { font-size: clamp(14px, 1.1vw, 20px); }
#inputs .label { color: var(--dim); display: inline-block; min-width: 6em; }
#equation { font-size: clamp(16px, 1.3vw, 24px); font-weight: 700; color: var(--accent); margin: 8px 0; }
#sentence { font-style: italic; margin: 8px 0; }
#notes div { color: var(--bad); margin: 4px 0; }
#op-panel { container-type: inline-size; }
.diagram { font-size: min(clamp(14px, 1.1vw, 20px), calc(100cqi / 39)); line-height: 1.25;
  background: transparent !important; margin: 8px 0 0; overflow-x: auto; }
#summary div { margin: 4px 0; }
#strip { flex: none; max-height: min(22vh, 180px); overflow-y: auto; display: flex; flex-wrap: wrap;
  align-content: flex-start; gap: 4px; margin: 0 -24px; padding: 6px 24px; background: var(--bg);
  border-top: 1px solid var(--border); font-size: 15px; }
#strip .open { display: inline-flex; flex-wrap: wrap; gap: 4px; padding-left: 6px;
  border-left: 3px solid var(--accent); }
#strip button { font: inherit; color: var(--fg); background: var(--chip); border: 1px solid var(--border);
  border-radius: 5px; padding: 1px 7px; cursor: pointer; }
#strip button.group { font-weight: 700; }
#strip button.now { background: var(--accent); color: var(--bg); font-weight: 700; }
#strip button.wrong { border: 2px solid var(--bad); color: var(--bad); font-weight: 700; }
#strip button.now.wrong { background: var(--bad); color: var(--bg); }
#strip button.tied { outline: 3px solid var(--op); outline-offset: 1px; font-weight: 700; }
#strip .part { color: var(--dim); align-self: center; padding: 0 2px 0 8px; }
#grad .cells { display: flex; flex-wrap: wrap; gap: 2px 18px; font-size: clamp(14px, 1.1vw, 21px); margin: 6px 0; }
#grad .cells span { white-space: nowrap; }
#grad .name { color: var(--op); font-weight: 700; }
#grad .made { font-size: clamp(14px, 1.1vw, 20px); }
#grad .made .label { color: var(--dim); display: inline-block; min-width: 6em; }
#grad .made span { white-space: nowrap; }
#grad .new { color: var(--accent); } #grad .view, #grad .same { color: var(--good); }
#grad button.tie { font: inherit; color: var(--fg); background: var(--chip); border: 2px solid var(--op);
  border-radius: 6px; padding: 2px 8px; cursor: pointer; text-align: left; }
#grad .sentence { font-style: italic; margin: 8px 0; }
#grad .fold { font-style: italic; color: var(--strided); margin: 8px 0; }
#saved div { margin: 2px 0; }
#saved table { border-collapse: collapse; margin-top: 8px; font-size: clamp(13px, 1vw, 18px); }
#saved td { padding: 1px 14px 1px 0; white-space: nowrap; }
footer { flex: none; padding: 4px 0; font-size: 15px; }
@media (max-width: 900px), (max-aspect-ratio: 1/1) {
  main { grid-template-columns: minmax(0, 1fr); grid-template-rows: minmax(0, 0.4fr) minmax(0, 0.6fr); }
}
"""

SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("trace-data").textContent);
  var ops = data.ops, last = ops.length;  // step `last` is the summary
  var grads = data.backward ? data.backward.rows : [];  // then one step per backward row, and what it keeps
  var end = data.backward ? last + grads.length + 1 : last;
  var step = 0, scale = 1, closed = {}, tied = -1;  // tied: the forward op the shown grad differentiates
  function op(i) {  // an op of a folded layer or a loop refers to the earlier op it repeats, fact for fact
    var o = ops[i];
    if (o.same === undefined) return o;
    var full = Object.assign({}, ops[o.same]);
    full.index = o.index; full.module = o.module;
    return full;
  }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) arrowText(e, text);
    if (cls) e.className = cls;
    return e;
  }
  function arrowText(e, text) {  // "->" never breaks between its two characters
    String(text).split("->").forEach(function (part, k) {
      if (k) { var a = document.createElement("span"); a.className = "arrow"; a.textContent = "->"; e.appendChild(a); }
      if (part) e.appendChild(document.createTextNode(part));
    });
    return e;
  }
  function clear(id) { var e = document.getElementById(id); e.replaceChildren(); return e; }
  document.getElementById("title").textContent = data.title;
  var header = clear("header");
  data.header.forEach(function (line) { header.appendChild(el("div", line)); });
  var firstIndex = last ? ops[0].index : 0, lastIndex = last ? ops[last - 1].index : 0;
  var wrongBefore = [0];
  for (var w = 0; w < last; w++) wrongBefore.push(wrongBefore[w] + (op(w).wrong ? 1 : 0));
  function anyWrong(from, to) { return wrongBefore[to + 1] - wrongBefore[from] > 0; }

  function opChip(i) {
    var o = op(i), b = el("button", "#" + o.index + " " + o.op + (o.wrong ? " ✗" : ""));
    b.className = (i === step ? "now" : "") + (o.wrong ? " wrong" : "") + (i === tied ? " tied" : "");
    if (o.wrong) b.title = "this op has an error";
    b.addEventListener("click", function () { show(i); });
    return b;
  }
  function addNodes(parent, nodes) {  // an int is an op; a group (a layer, a run of layers, a loop) opens
    nodes.forEach(function (n) {
      if (typeof n === "number") { parent.appendChild(opChip(n)); return; }
      var key = n.from + "-" + n.to, here = step >= n.from && step <= n.to, open = here && !closed[key];
      var bad = anyWrong(n.from, n.to);
      var chip = el("button", (open ? "▾ " : "▸ ") + n.label + (bad ? " ✗" : ""),
                    "group" + (here && !open ? " now" : "") + (bad ? " wrong" : "") +
                    (!open && tied >= n.from && tied <= n.to ? " tied" : ""));
      chip.title = n.title + (open ? "" : " (click to open)");
      chip.setAttribute("aria-expanded", open ? "true" : "false");
      chip.addEventListener("click", function () {
        if (here) { closed[key] = open; drawStrip(); } else show(n.from);
      });
      if (!open) { parent.appendChild(chip); return; }
      var box = el("span", null, "open");
      box.appendChild(chip);
      addNodes(box, n.kids);
      parent.appendChild(box);
    });
  }
  function drawStrip() {
    var strip = clear("strip");
    addNodes(strip, data.strip);
    var summary = el("button", "end", step === last ? "now" : "");
    summary.addEventListener("click", function () { show(last); });
    strip.appendChild(summary);
    if (data.backward) gradChips(strip);
    var now = strip.querySelector(".now");
    if (now) {  // keep the current chip in the strip's own view, without scrolling the page
      var s = strip.getBoundingClientRect(), b = now.getBoundingClientRect();
      if (b.top < s.top || b.bottom > s.bottom) strip.scrollTop += b.top - s.top - 6;
    }
  }

  function gradChips(strip) {  // the backward's rows after the forward's end, then what autograd keeps
    strip.appendChild(el("span", "backward", "part"));
    grads.forEach(function (g, k) {
      var at = last + 1 + k, b = el("button", g.label + " " + g.grad.replace(/^grad /, "∇"), "grad");
      b.className = "grad" + (at === step ? " now" : "");
      b.title = g.fold || g.grad;
      b.addEventListener("click", function () { show(at); });
      strip.appendChild(b);
    });
    var kept = el("button", "kept", step === end ? "now" : "");
    kept.addEventListener("click", function () { show(end); });
    strip.appendChild(kept);
  }
  function showGrad(g) {  // a backward row: the grad that arrived, each one sent back, the tie to its op
    var box = clear("grad"), saved = clear("saved");
    if (!g) return;
    if (g.at !== null) {
      var o = op(g.at), tie = el("button", "differentiates #" + o.index + " " + o.op + ": " + o.code, "tie");
      tie.title = "go to the forward op";
      tie.addEventListener("click", function () { show(g.at); });
      box.appendChild(tie);
    } else box.appendChild(el("div", "differentiates " + g.op + ", a call without a row of its own in the " +
                              "forward table: no code line is tied to it", "dim"));
    var cells = el("div", null, "cells");
    [[g.label, "dim"], [g.grad, "name"]].concat(g.arrived.map(function (c) { return [c, ""]; }))
      .forEach(function (c) { cells.appendChild(el("span", c[0], c[1])); });
    box.appendChild(cells);
    g.made.forEach(function (m) {
      var row = el("div", null, "made");
      row.appendChild(el("span", "→ " + m[0], "label"));
      arrowText(row, " " + m[1] + "  " + m[2] + "  ");
      row.appendChild(el("span", m[3], m[3].split(" ")[0]));
      box.appendChild(row);
    });
    if (g.sentence) box.appendChild(el("p", g.sentence, "sentence"));
    if (g.fold) box.appendChild(el("div", g.fold, "fold"));
  }
  function showKept() {  // what autograd keeps for the backward
    var saved = clear("saved");
    saved.appendChild(el("h2", "end of the backward pass: what autograd kept for it"));
    if (data.backward.note) saved.appendChild(el("div", data.backward.note));
    data.backward.summary.forEach(function (line) { saved.appendChild(el("div", line)); });
    var table = el("table", null, "mono");
    data.backward.saved.forEach(function (s) {
      var tr = el("tr");
      s.forEach(function (cell) { tr.appendChild(el("td", cell)); });
      table.appendChild(tr);
    });
    saved.appendChild(table);
  }
  function showCode(o) {
    var code = clear("code");
    document.getElementById("file").textContent = o ? o.file : "";
    document.getElementById("code-panel").style.display = o ? "" : "none";  // the summary has no code line
    document.getElementById("op-panel").style.gridColumn = o ? "" : "1 / -1";  // and takes the whole width
    document.getElementById("op-panel").style.gridRow = o ? "" : "1 / -1";
    if (!o) return;
    var lines = data.files[o.file] || [];
    if (!lines.length) { code.appendChild(el("div", "\u25b6 " + o.code, "cur")); return; }
    var span = Math.max(3, Math.min(10, Math.floor((window.innerHeight - 300) / 60)));
    var from = Math.max(1, o.line - span), to = Math.min(lines.length, o.line + span);
    var shown = lines.slice(from - 1, to), indent = commonIndent(shown);
    shown.forEach(function (text, k) {
      var row = el("div", null, from + k === o.line ? "cur" : "");
      row.appendChild(el("span", String(from + k), "ln"));
      row.appendChild(sourceLine(text || "", indent));
      code.appendChild(row);
    });
  }
  function centreCodeLine() {  // the highlighted line in the code panel's own view, whatever the zoom
    var cur = document.querySelector("#code .cur"), panel = document.getElementById("code-panel");
    if (!cur) return;
    for (var tries = 0; tries < 3; tries++) {  // (measured again: zoomed, a box's pixels and scrollTop's differ)
      var p = panel.getBoundingClientRect(), c = cur.getBoundingClientRect();
      if (c.top >= p.top && c.bottom <= p.bottom + 1) return;
      var perPixel = panel.clientHeight && p.height ? panel.clientHeight / p.height : 1;
      panel.scrollTop += (c.top - p.top - (p.height - c.height) / 2) * perPixel;
    }
  }
  function commonIndent(lines) {  // the indent every shown line shares: left out, so the code gets the room
    var widths = lines.filter(function (t) { return t && t.trim(); })
                      .map(function (t) { return t.length - t.replace(/^ +/, "").length; });
    return widths.length ? Math.min.apply(null, widths) : 0;
  }
  function sourceLine(text, indent) {
    // its own indent becomes padding, so a wrapped line goes on under its code (2 more columns in),
    // and its shape comment moves up to 2 spaces after the code, wrapped as one piece
    var m = /^( *)(.*?)(?: {2,}(#.*))?$/.exec(text);
    var src = el("span", null, "src");
    src.style.paddingLeft = (m[1].length - indent + 2) + "ch";
    src.appendChild(document.createTextNode(m[2] || " "));
    if (m[3]) {
      src.appendChild(document.createTextNode("  "));
      src.appendChild(el("span", m[3], "shape"));
    }
    return src;
  }
  var LABELS = ["#", "op", "shape [names]", "strides", "memory", "layout"];
  function showOp(o) {
    var cells = clear("row-cells");
    document.getElementById("row").style.display = o ? "" : "none";
    if (o) {
      [[o.index], [o.op, "op"], [o.shape], [o.strides], [o.memory, o.error ? "raised" : ""],
       [o.layout, o.layout]].forEach(function (c, k) {
        var td = el("td", c[0], c[1] || "");
        td.setAttribute("data-label", LABELS[k]);
        cells.appendChild(td);
      });
    }
    var inputs = clear("inputs");
    (o ? o.inputs : []).forEach(function (i) {
      var row = el("div");
      row.appendChild(el("span", i[0], "label"));
      arrowText(row, " " + i[1] + "  strides " + i[2]);
      inputs.appendChild(row);
    });
    arrowText(clear("equation"), o ? o.equation : "");
    arrowText(clear("sentence"), o ? (o.error ? "raised " + o.error : o.sentence) : "");
    var notes = clear("notes");
    (o ? o.notes : []).forEach(function (n) { notes.appendChild(el("div", n)); });
    var theme = document.documentElement.getAttribute("data-theme");
    document.getElementById("diagram").innerHTML = o ? data.diagrams[o.diagram[theme]] : "";  // Rich's escaped HTML
    var summary = clear("summary");
    if (!o && step === last) {
      summary.appendChild(el("h2", "end of the forward pass"));
      data.footer.concat(data.summary).forEach(function (line) { summary.appendChild(el("div", line)); });
    }
  }
  function show(i) {
    var before = step;
    step = Math.max(0, Math.min(end, i));
    if (step !== before) closed = {};
    var g = step > last && step < end ? grads[step - last - 1] : null;
    tied = g && g.at !== null ? g.at : -1;
    var o = step < last ? op(step) : null, t = tied >= 0 ? op(tied) : null;
    document.getElementById("position").textContent =
      o ? "#" + o.index + " " + o.op + (o.wrong ? " · ✗ error" : "") + " · ops #" + firstIndex + "-#" +
        lastIndex + " · " + o.where + (data.layered && o.module ? " · " + o.module : "")
        : g ? "backward " + (step - last) + "/" + grads.length + " · " + g.grad +
              (t ? " · differentiates #" + t.index + " " + t.op + " · " + t.where : "")
        : step === end && data.backward ? "backward · what autograd keeps · " + grads.length + " grads"
        : "summary · " + last + " ops";
    document.getElementById("op-panel").scrollTop = 0;
    showCode(o || t);
    showOp(o);
    showGrad(g);
    if (step === end && data.backward) showKept();
    drawStrip();  // the strip's height settles first, then the code panel's view is set
    centreCodeLine();
    if (history.replaceState) history.replaceState(null, "", "#" + step);
  }
  function zoom(by) {  // the panels' text, not the strip's: the strip keeps its bounded height
    scale = Math.round(Math.max(0.6, Math.min(2.5, scale + by)) * 10) / 10;
    document.querySelector("main").style.zoom = scale;
    show(step);
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    var k = ev.key;
    if (k === "ArrowRight" || k === "PageDown" || k === "Enter" || (k === " " && !ev.shiftKey)) show(step + 1);
    else if (k === "ArrowLeft" || k === "PageUp" || k === "Backspace" || (k === " " && ev.shiftKey)) show(step - 1);
    else if (k === "+" || k === "=") zoom(0.1);
    else if (k === "-" || k === "_") zoom(-0.1);
    else if (k === "Home") show(0);
    else if (k === "End") show(end);
    else if (k === "t" || k === "T") {
      var root = document.documentElement;
      root.setAttribute("data-theme", root.getAttribute("data-theme") === "dark" ? "light" : "dark");
      show(step);
    } else return;
    ev.preventDefault();
  });
  window.addEventListener("resize", function () { show(step); });
  function fromHash() { var i = parseInt((location.hash || "#0").slice(1), 10); show(isNaN(i) ? 0 : i); }
  window.addEventListener("hashchange", fromHash);  // a link to #N (or an edited address) goes there
  fromHash();
})();
"""

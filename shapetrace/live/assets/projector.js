// The projector's page of `shapetrace live`: plain JS, no framework. Text from the server (names never
// reach this page; answers do, in the histogram) goes in with textContent; only the memory diagram, which
// the server renders from the trace, is HTML. With the teacher's key in the URL's fragment (#key=...), never
// sent in a request line, it also moves the class: → or space next, ← back, r reveal, e end.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const MAX_TRIES = 600;
  const key = new URLSearchParams(location.hash.slice(1)).get("key");
  let ws = null, tries = 0, teacher = false, current = -1;

  function text(id, value) { $(id).textContent = value == null ? "" : String(value); }
  function send(obj) { if (ws && ws.readyState === 1) ws.send(JSON.stringify(obj)); }

  function connect() {
    ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
    ws.onopen = () => { tries = 0; text("link", ""); send(key ? { t: "teacher", key: key } : { t: "watch" }); };
    ws.onmessage = (ev) => handle(JSON.parse(ev.data));
    ws.onclose = () => {
      text("link", "reconnecting…");
      if (++tries <= MAX_TRIES) setTimeout(connect, Math.min(2500, 250 * tries));
    };
  }

  function go(action) { if (teacher) send({ t: "go", action: action }); }
  $("prev").addEventListener("click", () => go("prev"));
  $("next").addEventListener("click", () => go("next"));
  $("do-reveal").addEventListener("click", () => go("reveal"));
  $("end").addEventListener("click", () => go("end"));
  document.addEventListener("keydown", (ev) => {
    if (!teacher || ev.target.tagName === "INPUT") return;
    const action = { ArrowRight: "next", " ": "next", ArrowLeft: "prev", r: "reveal", e: "end" }[ev.key];
    if (action) { ev.preventDefault(); go(action); }
  });

  function handle(msg) {
    if (msg.t === "state") {
      if (key) { teacher = true; $("controls").hidden = false; }
      render(msg);
    } else if (msg.t === "count" && msg.moment === current) {
      text("count", msg.count); text("students", msg.students);
    } else if (msg.t === "refused") {
      text("refusal", msg.why);
    }
  }

  function bar(item, most) {
    const li = document.createElement("li");
    li.className = item.right ? "bar right" : "bar";
    const label = document.createElement("span");
    label.className = "label";
    label.textContent = item.answer + (item.right ? "  ✓ torch" : "");
    const fill = document.createElement("span");
    fill.className = "fill";
    fill.style.width = Math.max(2, Math.round(100 * item.count / most)) + "%";
    const count = document.createElement("span");
    count.className = "n";
    count.textContent = String(item.count);
    const meaning = document.createElement("span");
    meaning.className = "meaning";
    meaning.textContent = item.meaning || "";
    li.append(label, fill, count, meaning);
    return li;
  }

  function render(s) {
    const m = s.moment;
    current = m.number;
    text("title", s.title);
    text("position", "question " + (m.number + 1) + " of " + s.total);
    text("join-url", s.join); text("join-code", s.code); text("students", s.students);
    text("op", m.index == null ? m.prompt : "#" + m.index + " " + m.op);
    text("code", m.code + "    " + m.where);
    text("sizes", "sizes: " + m.sizes);
    text("context", m.context);
    $("context").hidden = !m.context;
    const list = $("inputs");
    list.replaceChildren();
    for (const [label, shape, strides] of m.inputs) {
      const li = document.createElement("li");
      li.textContent = label + " " + shape + "  strides " + strides;
      list.append(li);
    }
    text("count", s.count);
    $("reveal").hidden = !s.revealed;
    if (s.revealed) {
      const r = s.reveal;
      text("torch-shape", r.shape);
      text("torch-memory", r.memory_word);
      const most = Math.max(1, ...r.histogram.map((b) => b.count));
      $("histogram").replaceChildren(...r.histogram.map((b) => bar(b, most)));
      text("memory-counts", m.memory_question ?
        "view: " + r.memory_counts.view + " · new memory: " + r.memory_counts["new"] : "");
      text("sentence", r.sentence);
      $("notes").replaceChildren(...r.notes.map((note) => {
        const li = document.createElement("li");
        li.textContent = note; // the trace's diagnostics at this op (a catalogue bug names itself here)
        return li;
      }));
      $("diagram").innerHTML = r.diagram; // rendered by the server from the trace, never from an answer
    } else {
      $("histogram").replaceChildren(); $("notes").replaceChildren(); $("diagram").replaceChildren();
    }
    $("summary").hidden = !s.ended;
    if (s.ended) {
      const rows = s.summary.map((row) => {
        const tr = document.createElement("tr");
        const right = row.answered ? row.right + "/" + row.answered : "no answers";
        for (const cell of [row.number + 1, row.op, row.code, right, row.common_wrong]) {
          const td = document.createElement("td");
          td.textContent = String(cell);
          tr.append(td);
        }
        return tr;
      });
      $("summary-rows").replaceChildren(...rows);
    }
  }

  connect();
})();

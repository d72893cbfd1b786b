// The student's page of `shapetrace live`: plain JS, no framework. Every text from the server goes in
// with textContent (a name or an answer is never markup). The token that proves who this page is lives in
// localStorage: a reload or a dropped network resumes with the same name and answers.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const KEY = "shapetrace-live-token";
  const MAX_TRIES = 600; // reconnects before the page gives up (about 25 minutes)
  let ws = null, token = localStorage.getItem(KEY), joined = false, tries = 0, shownMoment = -1, choicesBuilt = false;
  if (location.hash.length > 1) $("code").value = location.hash.slice(1).toUpperCase().slice(0, 6);

  function show(id) { for (const s of ["join", "question", "ended"]) $(s).hidden = s !== id; }
  function send(obj) { if (ws && ws.readyState === 1) ws.send(JSON.stringify(obj)); }
  function text(id, value) { $(id).textContent = value == null ? "" : String(value); }

  function connect() {
    ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
    ws.onopen = () => {
      tries = 0; text("link", "");
      if (token) send({ t: "resume", token: token }); else show("join");
    };
    ws.onmessage = (ev) => handle(JSON.parse(ev.data));
    ws.onclose = () => {
      joined = false; text("link", "reconnecting…");
      if (++tries <= MAX_TRIES) setTimeout(connect, Math.min(2500, 250 * tries));
    };
  }

  function join(named) {
    send({ t: "join", code: $("code").value.trim(), name: named ? $("name").value : "" });
  }
  $("join-named").addEventListener("click", () => join(true));
  $("join-anon").addEventListener("click", () => join(false));

  $("answer-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const picked = document.querySelector("input[name=memory]:checked");
    send({ t: "answer", moment: shownMoment, shape: $("shape").value, memory: picked ? picked.value : null });
  });

  function handle(msg) {
    if (msg.t === "welcome") {
      token = msg.token; joined = true; localStorage.setItem(KEY, token); text("who", "· " + msg.name);
    } else if (msg.t === "refused") {
      if (msg.about === "resume") { token = null; localStorage.removeItem(KEY); show("join"); }
      text($("join").hidden ? "status" : "join-status", msg.why);
    } else if (msg.t === "ack") {
      text("status", "received: " + msg.shown + (msg.memory ? " · " + msg.memory : "") + " — wait for the reveal");
      lock(true);
    } else if (msg.t === "state" && joined) {
      render(msg);
    }
  }

  function lock(on) {
    for (const el of $("answer-form").querySelectorAll("input, button")) el.disabled = on;
  }

  function buildChoices(choices) {
    if (choicesBuilt) return;
    for (const [value, label] of Object.entries(choices)) {
      const row = document.createElement("label");
      row.className = "choice";
      const input = document.createElement("input");
      input.type = "radio"; input.name = "memory"; input.value = value;
      row.append(input, " " + label);
      $("memory").append(row);
    }
    choicesBuilt = true;
  }

  function render(s) {
    const you = s.you || {};
    if (s.ended) {
      show("ended");
      text("final", "You got " + you.score + " of " + you.asked + " shapes right. Thank you!");
      return;
    }
    show("question");
    buildChoices(s.choices);
    const m = s.moment;
    if (m.number !== shownMoment) {
      shownMoment = m.number;
      $("shape").value = ""; text("status", "");
      for (const r of document.querySelectorAll("input[name=memory]")) r.checked = false;
    }
    text("q-number", "Question " + (m.number + 1) + " of " + s.total);
    text("q-op", m.index == null ? m.where : "#" + m.index + " " + m.op);
    text("prompt", m.prompt);
    text("how", m.how);
    $("memory").hidden = !m.memory_question;
    text("q-code", m.code);
    text("q-sizes", "sizes: " + m.sizes);
    text("q-context", m.context);
    $("q-context").hidden = !m.context;
    const list = $("q-inputs");
    list.replaceChildren();
    for (const [label, shape, strides] of m.inputs) {
      const li = document.createElement("li");
      li.textContent = label + " " + shape + "  strides " + strides;
      list.append(li);
    }
    if (you.answered) {
      $("shape").value = you.text;
      for (const r of document.querySelectorAll("input[name=memory]")) r.checked = r.value === you.memory;
      text("status", "your answer: " + you.shown + (you.memory ? " · " + you.memory : ""));
    }
    lock(Boolean(you.answered) || s.revealed);
    $("result").hidden = !s.revealed;
    if (s.revealed) {
      const r = s.reveal;
      text("torch-shape", r.shape);
      text("torch-memory", "· " + r.memory_word);
      if (!you.answered) { text("verdict", "You did not answer this one."); text("mistake", ""); }
      else {
        text("verdict", (you.right ? "✓ right" : "✗ not quite") + " — you said " + you.shown +
             (you.memory ? (you.memory_right ? " · memory ✓" : " · memory ✗") : ""));
        text("mistake", you.right ? "" : (you.meaning || you.reason));
      }
      $("verdict").className = you.right ? "right" : "wrong";
      text("sentence", r.sentence);
      text("notes", r.notes.join(" ")); // the trace's diagnostics: a right shape can still hold the wrong contents
      if (!you.answered) text("status", "");
    }
  }

  connect();
})();

"""``shapetrace live`` on the command line: its help, one-line usage errors before torch (a missing extra,
a CSV that exists, a bad or busy port), and a real process that prints the join details and QR code, serves
a student, and saves the answers when Ctrl-C stops it."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from conftest import ROOT, cli_in_process


def test_help_says_how_to_run_a_lecture_hall_in_two_commands():
    out = cli_in_process("live", "--help", env={"COLUMNS": "200"})
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert ('In a lecture hall, two commands: pip install "shapetrace[live]", then shapetrace live --host 0.0.0.0'
            in text)
    for option in ("--host", "--port", "--csv", "--break", "--d-model", "--long-names"):
        assert option in text


def test_without_the_extra_one_line_says_how_to_install_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "segno" else real(name, *a))
    out = cli_in_process("live")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == 'error: shapetrace live needs the live extra (segno missing): pip install "shapetrace[live]"\n'


def test_an_existing_csv_is_never_replaced(tmp_path):
    mine = tmp_path / "grades.csv"
    mine.write_text("mine")
    out = cli_in_process("live", "--csv", str(mine), env={"COLUMNS": "300"})
    assert out.returncode == 2
    assert out.stderr == (f"error: --csv {mine}: the file exists; the answers never replace a file: pick another "
                          "name\n")
    assert mine.read_text() == "mine"


def test_a_lesson_takes_no_model_option_and_must_exist():
    out = cli_in_process("live", "--lesson", "1", "--heads", "4")
    assert (out.returncode, out.stderr) == (2, "error: --lesson asks a lesson's own examples: drop --heads\n")
    out = cli_in_process("live", "--lesson", "99", env={"COLUMNS": "300"})
    assert out.returncode == 2 and out.stderr.startswith("error: there is no lesson 99; lessons are numbered 1, 2,")


def test_the_quiz_takes_no_model_option_and_a_known_topic():
    out = cli_in_process("live", "--quiz", "--break", "skip-transpose")
    assert (out.returncode, out.stderr) == (2, "error: --quiz asks the quiz bank's questions: drop --broken\n")
    out = cli_in_process("live", "--topic", "strides")
    assert (out.returncode, out.stderr) == (2, "error: --topic and --count work with --quiz\n")
    out = cli_in_process("live", "--quiz", "--topic", "nope", env={"COLUMNS": "300"})
    assert out.returncode == 2 and out.stderr.startswith("error: no quiz topic 'nope'; topics: ")


def test_a_bad_or_busy_port_is_one_line():
    out = cli_in_process("live", "--port", "70000")
    assert (out.returncode, out.stderr) == (2, "error: --port 70000: use a port from 1 to 65535 (0: any free port)\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = cli_in_process("live", "--port", str(port), env={"COLUMNS": "300"})
    assert out.returncode == 1
    assert out.stderr == (f"error: cannot listen on 127.0.0.1:{port}: Address already in use (pick another --port "
                          "or --host)\n")


def _lines(proc, into: queue.Queue) -> None:
    for line in proc.stdout:
        into.put(line)


def test_a_real_class_prints_the_join_details_serves_and_saves_at_ctrl_c(tmp_path):
    pytest.importorskip("websockets", reason="the live extra is not installed: pip install -e '.[live]'")
    from websockets.sync.client import connect

    csv = tmp_path / "answers.csv"
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="300", NO_COLOR="1", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "shapetrace", "live", "--port", "0", "--break", "skip-transpose",
                             "--csv", str(csv)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=tmp_path)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(proc, lines), daemon=True).start()
    try:
        printed = []
        deadline = time.monotonic() + 120
        while not any("projector" in line for line in printed) and time.monotonic() < deadline:
            printed.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        text = "".join(printed)
        join = re.search(r"join: http://127\.0\.0\.1:(\d+)/#([A-Z2-9]{6})   code: \2\n", text)
        key = re.search(r"projector \(teacher only, it moves the class\): http://127\.0\.0\.1:(\d+)/projector#key=(\S+)",
                        text)
        assert join and key and join.group(1) == key.group(1), text
        assert "▀" in text or "█" in text  # the QR code, in half blocks
        with connect(f"ws://127.0.0.1:{join.group(1)}/ws", open_timeout=20) as ws:
            ws.send(json.dumps({"t": "join", "name": "Ada", "code": join.group(2)}))
            assert json.loads(ws.recv(timeout=20))["name"] == "Ada"
            assert json.loads(ws.recv(timeout=20))["moment"]["op"] == "view"
            ws.send(json.dumps({"t": "answer", "moment": 0, "shape": "[B, H, T, d_k]", "memory": "view"}))
            assert json.loads(ws.recv(timeout=20))["shown"] == "[2, 8, 6, 64]"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    rest = []
    while not lines.empty():
        rest.append(lines.get())
    assert proc.returncode == 0
    assert "1 student; answers saved to " + str(csv) in "".join(rest).replace("\n", "")
    rows = csv.read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith('1,Ada,1,view,"return x.view(B, self.heads, T, self.d_k)",'
                                                 '"[B, H, T, d_k]","[2, 8, 6, 64]",1,')

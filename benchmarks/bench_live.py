"""A lecture hall of simulated students against a real ``shapetrace live`` process, over WebSockets.

    python benchmarks/bench_live.py [--students 200] [--questions 3]

The server is the command itself (``python -m shapetrace live --port 0``, its own process, so its memory is
its own). Every student joins, then for each question every student sends an answer at the same moment
(one of four typical answers, right and wrong); the teacher reveals as soon as the last answer is
acknowledged. Printed per question: answers counted, whether the histogram equals the answers sent, the
time from the last answer to the projector's count and to the histogram; then the server's memory (VmRSS
before and after the class, VmHWM) and the CSV's rows after the class ended and Ctrl-C stopped it. Exit 1
when any answer is lost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parents[1]
#: Four typical answers per question of the reference run (sizes, names, a forgotten op, a wrong order).
ANSWERS = [
    ["[B, T, H, d_k]", "2x6x8x64", "[B, T, d_k, H]", "2 6 512"],
    ["[B, H, T, d_k]", "[B, T, H, d_k]", "2x8x6x64", "[B, H, d_k, T]"],
    ["[B, H, d_k, T]", "[B, H, T, d_k]", "2x8x64x6", "(2, 8, 64, 6)"],
    ["[B, H, T, T]", "[B, H, d_k, d_k]", "[B, H, T, d_k]", "2x8x6x6"],
]
WAIT = 60.0  # seconds any one step may take before the benchmark gives up


def _memory(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024  # MiB
    return fields


class Server:
    """``python -m shapetrace live`` in its own process; its lines are read by a thread into a queue."""

    def __init__(self, csv: Path):
        env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="300", NO_COLOR="1", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "shapetrace", "live", "--port", "0", "--csv", str(csv)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.join = self.key = self.code = ""
        deadline = time.monotonic() + WAIT
        while not self.key:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if m := re.search(r"join: (http://\S+/)#(\w+)", line):
                self.join, self.code = m.group(1), m.group(2)
            if m := re.search(r"projector#key=(\S+)", line):
                self.key = m.group(1)
        self.ws = self.join.replace("http://", "ws://") + "ws"

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def stop(self) -> str:
        """Ctrl-C, as a teacher would; returns the rest of what it printed."""
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(WAIT)
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        return "".join(rest)


class Client:
    """One page: its socket and the messages it got, by kind, each with the time it arrived."""

    def __init__(self, ws):
        self.ws = ws
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for text in self.ws:
            self.inbox.put_nowait((time.perf_counter(), json.loads(text)))

    async def expect(self, test) -> tuple[float, dict]:
        while True:
            at, msg = await asyncio.wait_for(self.inbox.get(), WAIT)
            if test(msg):
                return at, msg

    async def send(self, message: dict) -> None:
        await self.ws.send(json.dumps(message))


async def _class(server: Server, students: int, questions: int) -> tuple[list[str], bool]:
    out, ok = [], True
    teacher = Client(await connect(server.ws))
    await teacher.send({"t": "teacher", "key": server.key})
    await teacher.expect(lambda m: m["t"] == "state")
    pages = [Client(await connect(server.ws, max_queue=64)) for _ in range(students)]
    await asyncio.gather(*(p.send({"t": "join", "name": f"student {i}", "code": server.code})
                           for i, p in enumerate(pages)))
    await asyncio.gather(*(p.expect(lambda m: m["t"] == "state") for p in pages))
    memory = [_memory(server.proc.pid)]
    for q in range(questions):
        if q:
            await teacher.send({"t": "go", "action": "next"})
            await teacher.expect(lambda m, q=q: m["t"] == "state" and m["moment"]["number"] == q)
            await asyncio.gather(*(p.expect(lambda m, q=q: m["t"] == "state" and m["moment"]["number"] == q)
                                   for p in pages))
        typed = ANSWERS[q % len(ANSWERS)]
        await asyncio.gather(*(p.send({"t": "answer", "moment": q, "shape": typed[i % 4],
                                       "memory": ("view", "new")[i % 2]}) for i, p in enumerate(pages)))
        acks = await asyncio.gather(*(p.expect(lambda m: m["t"] in ("ack", "refused")) for p in pages))
        last_answer = max(at for at, _ in acks)
        sent = Counter(msg["shown"] for _, msg in acks if msg["t"] == "ack")
        counted_at, _ = await teacher.expect(lambda m, q=q: m["t"] == "count" and m["moment"] == q
                                             and m["count"] == students)
        revealed_at = time.perf_counter()
        await teacher.send({"t": "go", "action": "reveal"})
        shown_at, state = await teacher.expect(lambda m: m["t"] == "state" and m["revealed"])
        bars = {b["answer"]: b["count"] for b in state["reveal"]["histogram"]}
        counted = sum(bars.values())
        same = bars == dict(sent) and counted == students
        ok &= same
        out.append(f"question {q + 1}: {counted}/{students} answers counted, histogram "
                   f"{'equals' if same else 'DIFFERS FROM'} the answers sent; last answer -> projector count "
                   f"{1000 * (counted_at - last_answer):.1f} ms, last answer -> histogram "
                   f"{1000 * (shown_at - last_answer):.1f} ms "
                   f"(reveal -> histogram {1000 * (shown_at - revealed_at):.1f} ms)")
        await asyncio.gather(*(p.expect(lambda m: m["t"] == "state" and m["revealed"]) for p in pages))
    memory.append(_memory(server.proc.pid))
    await teacher.send({"t": "go", "action": "end"})
    await teacher.expect(lambda m: m["t"] == "state" and m["ended"])
    for page in [teacher, *pages]:
        await page.ws.close()
    before, after = memory
    out.append(f"server memory: {before['VmRSS']:.1f} MiB with {students} students joined, {after['VmRSS']:.1f} MiB "
               f"after {students * questions} answers (peak {after['VmHWM']:.1f} MiB): "
               f"{1024 * (after['VmRSS'] - before['VmRSS']) / (students * questions):+.2f} KiB per answer")
    return out, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--questions", type=int, default=3, choices=range(1, 9))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "answers.csv"
        server = Server(csv)
        try:
            print(f"live class: {args.students} students, {args.questions} questions, every answer of a question "
                  f"sent at once; server: shapetrace live (pid {server.proc.pid})")
            lines, ok = asyncio.run(asyncio.wait_for(_class(server, args.students, args.questions), 10 * WAIT))
            print("\n".join(lines))
        finally:
            rest = server.stop()
        rows = csv.read_text().count("\n") - 1 if csv.exists() else 0
        ok &= rows == args.students * args.questions and server.proc.returncode == 0 and "answers saved to" in rest
        print(f"csv: {rows} rows for {args.students * args.questions} answers; server exit {server.proc.returncode} "
              "after Ctrl-C" + ("" if "answers saved to" in rest else " (no 'answers saved' line)"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

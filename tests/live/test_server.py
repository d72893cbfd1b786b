"""The live server for real: Uvicorn on a free port of 127.0.0.1, driven over WebSockets by the websockets
client (the ``live`` extra). Hostile input (a 1 MB name, markup in names and answers, answers for another
step or as another student, replays, a flood, a student moving the class, another site's page) each gets a
clear refusal, and the class keeps running. Every server stops by itself after a minute at the latest."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request

import pytest
from conftest import run_async

pytest.importorskip("websockets", reason="the live extra is not installed: pip install -e '.[live]'")

from live_classes import fresh_class  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from shapetrace.live.classstate import LiveClass  # noqa: E402
from shapetrace.live.server import FLOOD_CLOSE, LiveServer, Running  # noqa: E402

RECV = 10  # seconds any one message may take


@pytest.fixture
def served():
    live = fresh_class("skip-transpose")
    with Running(LiveServer(live, "http://127.0.0.1:1/#code"), stop_after=60) as running:
        yield live, running


async def _recv(ws, kind: str | None = None) -> dict:
    while True:
        msg = json.loads(await asyncio.wait_for(ws.recv(), RECV))
        if kind is None or msg["t"] == kind:
            return msg


async def _student(url: str, live: LiveClass, name: str = "Ada"):
    ws = await connect(url)
    await ws.send(json.dumps({"t": "join", "name": name, "code": live.join_code}))
    welcome = await _recv(ws, "welcome")
    await _recv(ws, "state")
    return ws, welcome


def _run(coro):
    return run_async(coro, 45)


def test_hostile_input_is_refused_and_the_class_keeps_running(served):
    live, running = served
    url = f"ws://127.0.0.1:{running.port}/ws"

    async def scenario():
        teacher = await connect(url)
        await teacher.send(json.dumps({"t": "teacher", "key": live.teacher_key}))
        await _recv(teacher, "state")
        # a 1 MB name: the socket is closed as too big (1009) before the server reads it
        big = await connect(url)
        await big.send(json.dumps({"t": "join", "name": "n" * 1_000_000, "code": live.join_code}))
        with pytest.raises(ConnectionClosed) as closed:
            await _recv(big)
        assert closed.value.rcvd.code == 1009
        ada, welcome = await _student(url, live, "<img src=x onerror=alert(1)>")
        assert welcome["name"] == "<img src=x onerror=alert(1)>"
        refusals = [
            ({"t": "join", "name": "x" * 41, "code": live.join_code}, "this page has joined already"),
            ({"t": "answer", "moment": 1, "shape": "2x8x6x64"},
             "that question is not open: answer the one on the projector"),
            ({"t": "answer", "moment": 0, "shape": "<script>alert(1)</script>"},
             "cannot read that shape: cannot read '<script>alert(1)</script>' as an axis: write a number, a name "
             "or a product like H*d_k"),
            ({"t": "go", "action": "next"}, "only the teacher moves the class"),
            ({"t": "teacher", "key": "guess"}, "wrong teacher key"),
            ({"t": "nonsense"}, "not a message this class reads"),
        ]
        for message, why in refusals:
            await ada.send(json.dumps(message))
            assert (await _recv(ada, "refused"))["why"] == why
        await ada.send("not json")
        assert (await _recv(ada, "refused"))["why"] == "not a message this class reads"
        # answering as another student: the socket is Ada's, whatever token the message names
        bo, bo_welcome = await _student(url, live, "Bo")
        await ada.send(json.dumps({"t": "answer", "moment": 0, "shape": "2x8x6x64", "token": bo_welcome["token"]}))
        assert (await _recv(ada, "ack"))["shown"] == "[2, 8, 6, 64]"
        assert [s.name for s in live.students.values() if 0 in s.answers] == ["<img src=x onerror=alert(1)>"]
        await ada.send(json.dumps({"t": "answer", "moment": 0, "shape": "2x8x6x64"}))  # a replay
        assert (await _recv(ada, "refused"))["why"] == "you already answered this question"
        # a guessed token resumes nobody
        eve = await connect(url)
        await eve.send(json.dumps({"t": "resume", "token": "0" * 32}))
        assert (await _recv(eve, "refused")) == {"t": "refused", "why": "unknown student: join again",
                                                 "about": "resume"}
        # a flood from one client: refusals, then the socket is closed (1008); nobody else notices
        with pytest.raises(ConnectionClosed) as closed:
            for _ in range(10 * FLOOD_CLOSE):
                await eve.send(json.dumps({"t": "nonsense"}))
            for _ in range(10 * FLOOD_CLOSE):
                await _recv(eve)
        assert closed.value.rcvd.code == 1008
        await bo.send(json.dumps({"t": "answer", "moment": 0, "shape": "[B, T, H, d_k]", "memory": "new"}))
        assert (await _recv(bo, "ack"))["shown"] == "[2, 6, 8, 64]"
        await teacher.send(json.dumps({"t": "go", "action": "reveal"}))
        state = await _recv(teacher, "state")
        assert [(b["answer"], b["count"]) for b in state["reveal"]["histogram"]] == [
            ("[2, 6, 8, 64]", 1), ("[2, 8, 6, 64]", 1)]
        result = (await _recv(bo, "state"))["you"]
        assert (result["right"], result["meaning"]) == (False, "axes 1 and 2 swapped: torch has the axis of size 8 "
                                                               "before the axis of size 6")
        for ws in (teacher, ada, bo):
            await ws.close()

    _run(scenario())


def test_a_student_who_drops_off_keeps_name_and_answers(served):
    live, running = served
    url = f"ws://127.0.0.1:{running.port}/ws"

    async def scenario():
        ws, welcome = await _student(url, live, "Ada")
        await ws.send(json.dumps({"t": "answer", "moment": 0, "shape": "[B, H, T, d_k]", "memory": "view"}))
        await _recv(ws, "ack")
        await ws.close()
        again = await connect(url)
        await again.send(json.dumps({"t": "resume", "token": welcome["token"]}))
        assert (await _recv(again, "welcome"))["name"] == "Ada"
        you = (await _recv(again, "state"))["you"]
        assert (you["answered"], you["text"], you["memory"]) == (True, "[B, H, T, d_k]", "view")
        assert "right" not in you  # not before the reveal
        await again.close()
        assert len(live.students) == 1

    _run(scenario())


def test_another_sites_page_cannot_open_a_socket(served):
    live, running = served

    async def scenario():
        with pytest.raises(Exception) as refused:
            async with connect(f"ws://127.0.0.1:{running.port}/ws", origin="http://evil.example") as ws:
                await _recv(ws)
        assert "403" in str(refused.value) or "1008" in str(refused.value)

    _run(scenario())


def test_pages_come_from_the_tool_with_a_strict_policy(served):
    live, running = served
    for path in ("/", "/projector", "/static/student.js", "/static/projector.js", "/static/live.css", "/qr.svg"):
        with urllib.request.urlopen(running.url + path, timeout=10) as response:
            body = response.read().decode()
            assert "script-src 'self'" in response.headers["content-security-policy"]
            assert response.headers["x-content-type-options"] == "nosniff"
        assert not re.search(r"(src|href)=\"(https?:)?//", body), path  # no CDN, no outside asset
        assert "innerHTML" not in body or path == "/static/projector.js", path
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(running.url + "/static/../server.py", timeout=10)
    assert missing.value.code == 404

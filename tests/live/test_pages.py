"""A scripted class in a real headless Chromium (the system one, through playwright): one projector page
(the teacher's, moving the class with the keyboard) and 30 student pages, each on its own origin (its own
localStorage, as on its own phone), step through ``run --break skip-transpose``, and through lesson 1's
predict moments. Each question: every student answers through the page; the projector counts them; no page
holds torch's answer before the reveal (its DOM and every WebSocket frame it received are read); the
reveal's histogram equals the answers sent and shows torch's answer; each student sees their own result.
At the end the summary is on the projector and the CSV holds every answer."""

from __future__ import annotations

import asyncio
import csv
import json
import re
from collections import Counter

import pytest
from conftest import playwright_entry, require_tool, run_async

pytest.importorskip("starlette", reason="the live extra is not installed: pip install -e '.[live]'")

from live_classes import fresh_class  # noqa: E402

from shapetrace.live.classstate import LiveClass, shown_sizes  # noqa: E402
from shapetrace.live.server import LiveServer, Running  # noqa: E402
from shapetrace.live.session import Saver  # noqa: E402

STUDENTS = 30
NBSP = "\u00a0"
WAIT_MS = 60_000  # a shared machine under load; a page that waits this long has failed
HOSTILE_NAME = "<img src=x onerror=\"window.pwned=1\">"




def _answers(moment, students: int = STUDENTS) -> list[tuple[str, str]]:
    """What the students type (30 in the biggest class): torch's sizes, the input's sizes (the op forgotten)
    and the last two axes swapped, in three of the quiz's formats, with both memory answers."""
    right = tuple(moment.output.shape)
    forgot = tuple(moment.event.inputs[0].shape)
    swapped = (*right[:-2], right[-1], right[-2])
    typed = ["x".join(map(str, right)), "[" + ", ".join(map(str, forgot)) + "]",
             "(" + ",".join(map(str, swapped)) + ")"]
    return [(typed[i % 3] if i % 5 else typed[0], ("view", "new")[i % 2]) for i in range(students)]


def _read(typed: str) -> str:
    """How the histogram labels a typed answer of numbers: ``2x8x6x64`` -> ``[2, 8, 6, 64]``."""
    return shown_sizes(tuple(int(p) for p in typed.strip("[]()").replace("x", ",").split(",")))


def _plain(text: str) -> str:
    return text.replace(NBSP, " ")


def _secrets(moment, earlier) -> list[str]:
    """Texts only this question's reveal may bring: its sentence, and torch's shape unless an input or an
    earlier reveal already showed it."""
    public = {_plain(shape) for _, shape, _ in moment.ask["inputs"]} | {m.reveal["shape"] for m in earlier}
    shape = moment.reveal["shape"]
    return [moment.reveal["sentence"]] + ([] if shape in public else [shape])


def _frames_hold(frames: list[str], secrets: list[str], number: int) -> list[str]:
    """What the frames a page received hold of question ``number``'s answer (states of earlier questions,
    revealed before it, are skipped)."""
    found = []
    for frame in frames:
        message = json.loads(frame)
        if message["t"] == "state" and message["moment"]["number"] < number:
            continue
        text = _plain(json.dumps(message, ensure_ascii=False))
        if "reveal" in message or any(k in message.get("you", {}) for k in ("right", "meaning", "reason")):
            found.append(f"a revealed state: {frame[:80]}")
        found += [f"{secret!r} in a frame" for secret in secrets if secret in text]
    return found


@pytest.fixture
def chromium():
    return require_tool("chromium")


#: (a class of 30 once, at the catalogue's run; the lesson's class at 10 students: each page costs the
#: shared cores about 0.4 CPU-s, and what 30 pages prove about scale the first class proves)
@pytest.mark.parametrize("run,students", [("skip-transpose", STUDENTS), ("lesson 1", 10)])
def test_a_class_of_students_and_a_projector_step_through_it(chromium, tmp_path, run, students):
    live = fresh_class(run)
    saver = Saver(live, tmp_path / "answers.csv")
    with Running(LiveServer(live, "http://127.0.0.1:1/#" + live.join_code, on_end=saver), stop_after=300,
                 origins=students) as running:
        run_async(_class(chromium, live, running, students), 280)
    rows = list(csv.DictReader(open(saver.saved, encoding="utf-8")))
    assert len(rows) == students * len(live.moments)
    for moment in live.moments:
        sent = Counter(_read(typed) for typed, _ in _answers(moment, students))
        got = Counter(r["read_as"] for r in rows if r["question"] == str(moment.number + 1))
        assert got == sent
    assert {r["name"] for r in rows} == {HOSTILE_NAME} | {f"student {i}" for i in range(1, students)}


async def _class(chromium: str, live: LiveClass, running: Running, students: int) -> None:
    async with playwright_entry("async")() as p:
        # one renderer process for every page: 31 processes would crawl on two shared cores
        browser = await p.chromium.launch(executable_path=chromium,
                                          args=["--no-sandbox", "--disable-gpu", "--renderer-process-limit=1"])
        try:
            await _lesson(browser, live, running, students)
        finally:
            await browser.close()


async def _page(context, url: str, frames: list[str]):
    page = await context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
    await page.goto(url)
    return page


async def _lesson(browser, live: LiveClass, running: Running, count: int) -> None:
    """Every student page on its own origin (its own port of the same server): its own localStorage, as on
    its own phone, while all pages share one browser context."""
    projector_frames: list[str] = []
    projector = await _page(await browser.new_context(viewport={"width": 1280, "height": 800}),
                            f"{running.url}/projector#key={live.teacher_key}", projector_frames)
    await projector.wait_for_selector("#controls:not([hidden])")
    assert await projector.text_content("#join-code") == live.join_code
    frames: list[list[str]] = [[] for _ in range(count)]
    phones = await browser.new_context(viewport={"width": 360, "height": 740})
    students = await asyncio.gather(*(_page(phones, f"{running.origin(i)}/#{live.join_code}", frames[i])
                                      for i in range(count)))
    await asyncio.gather(*(_join(page, HOSTILE_NAME if i == 0 else f"student {i}")
                           for i, page in enumerate(students)))
    assert await students[0].text_content("#who") == "· " + HOSTILE_NAME  # shown as text, never run
    assert await students[0].evaluate("window.pwned") is None
    assert await students[0].evaluate("document.documentElement.scrollWidth") <= 360  # a phone, no sideways scroll
    for moment in live.moments:
        await _question(live, projector, projector_frames, students, frames, moment)
        if moment.number + 1 < len(live.moments):
            await projector.keyboard.press("ArrowRight")
    await projector.keyboard.press("e")
    await projector.wait_for_selector("#summary:not([hidden])")
    rows = await projector.locator("#summary-rows tr").count()
    assert rows == len(live.moments)
    await students[3].wait_for_selector("#ended:not([hidden])")
    assert (await students[3].text_content("#final")).startswith("You got ")


async def _join(page, name: str) -> None:
    await page.wait_for_selector("#join:not([hidden])")
    await page.fill("#name", name)
    await page.click("#join-named")
    await page.wait_for_selector("#question:not([hidden])")


#: One student's answer, typed through the page's own form (one round trip per page: the test stays fast).
#: (Waits use locators: the pages' Content-Security-Policy forbids the eval that wait_for_function needs.)
ANSWER_JS = """([typed, memory]) => {
  document.getElementById("shape").value = typed;
  document.querySelector(`input[name=memory][value=${memory}]`).checked = true;
  document.getElementById("answer-form").requestSubmit(document.getElementById("send"));
}"""


async def _answer(page, typed: str, memory: str, number: int) -> None:
    await page.locator("#q-number", has_text=re.compile(f"^Question {number + 1} of ")).wait_for()
    await page.evaluate(ANSWER_JS, [typed, memory])
    await page.locator("#status", has_text=re.compile("^received: ")).wait_for()


async def _question(live, projector, projector_frames, students, frames, moment) -> None:
    answers = _answers(moment, len(students))
    await asyncio.gather(*(_answer(page, typed, memory, moment.number)
                           for page, (typed, memory) in zip(students, answers)))
    await projector.locator("#count", has_text=re.compile(f"^{len(students)}$")).wait_for()
    if moment.number == 1:  # a reload keeps the name and the answer (the token is in localStorage)
        await students[1].reload()
        await students[1].locator("#status", has_text=re.compile("^your answer: ")).wait_for()
        assert await students[1].text_content("#who") == "· student 1"
        assert await students[1].input_value("#shape") == answers[1][0]
    secrets = _secrets(moment, live.moments[:moment.number])
    for page, got in [(projector, projector_frames), *zip(students, frames)]:
        assert _frames_hold(got, secrets, moment.number) == []
        dom = _plain(await page.content())
        assert [s for s in secrets if s in dom] == []
    await projector.keyboard.press("r")
    await projector.wait_for_selector("#reveal:not([hidden])")
    assert _plain(await projector.text_content("#torch-shape")) == moment.reveal["shape"]
    bars = await projector.locator("#histogram li").evaluate_all(
        "items => items.map(li => [li.querySelector('.label').textContent, li.querySelector('.n').textContent])")
    right = shown_sizes(tuple(moment.output.shape))
    sent = Counter(_read(typed) for typed, _ in answers)
    assert {label.removesuffix("  ✓ torch"): int(n) for label, n in bars} == dict(sent)
    assert [label for label, _ in bars if label.endswith("✓ torch")] == [right + "  ✓ torch"]
    notes = await projector.locator("#notes li").all_text_contents()
    assert [_plain(n) for n in notes] == moment.reveal["notes"]
    if moment.number == 0 and moment.ask["code"] == "return x.view(B, self.heads, T, self.d_k)":
        # the catalogue bug names itself at its op: the right shape, the wrong contents
        assert notes[0].startswith("✗ error mixed-axis: view #1 turns [B=2, T=6, D=512] into [B=2, !T·H=8, !H=6, "
                                   "d_k=64]")
    for i in (0, 2):  # a right answer and a wrong one (the input's shape), as each student sees it
        page = students[i]
        await page.wait_for_selector("#result:not([hidden])")
        verdict = await page.text_content("#verdict")
        assert verdict.startswith("✓ right" if _read(answers[i][0]) == right else "✗ not quite"), verdict
        assert _plain(await page.text_content("#torch-shape")) == moment.reveal["shape"]


def test_a_quiz_class_in_the_pages(chromium, tmp_path):
    """Three students answer the quiz bank's stride questions in the pages: no memory question, the
    question's own prompt and formats, the histogram and each student's result."""
    live = fresh_class("quiz strides")
    with Running(LiveServer(live, "http://127.0.0.1:1/#" + live.join_code), stop_after=120, origins=3) as running:
        run_async(_quiz_class(chromium, live, running), 110)
    assert live.answered(0) == 3


async def _quiz_class(chromium: str, live: LiveClass, running: Running) -> None:
    async with playwright_entry("async")() as p:
        browser = await p.chromium.launch(executable_path=chromium,
                                          args=["--no-sandbox", "--disable-gpu", "--renderer-process-limit=1"])
        try:
            projector = await _page(await browser.new_context(), f"{running.url}/projector#key={live.teacher_key}",
                                    [])
            await projector.wait_for_selector("#controls:not([hidden])")
            phones = await browser.new_context(viewport={"width": 360, "height": 740})
            students = [await _page(phones, f"{running.origin(i)}/#{live.join_code}", []) for i in range(3)]
            for i, page in enumerate(students):
                await _join(page, f"s{i}")
            assert await students[0].text_content("#prompt") == "What is y.stride()?"
            assert await students[0].text_content("#how") == "strides written like (7, 7, 1)"
            assert await students[0].locator("#memory").is_hidden()
            for page, typed in zip(students, ["(3072, 64, 512, 1)", "3072x384x64x1", "[3072, 64, 512, 1]"]):
                await page.evaluate("""(typed) => {
                  document.getElementById("shape").value = typed;
                  document.getElementById("answer-form").requestSubmit(document.getElementById("send"));
                }""", typed)
                await page.locator("#status", has_text=re.compile("^received: ")).wait_for()
            await projector.locator("#count", has_text=re.compile("^3$")).wait_for()
            await projector.keyboard.press("r")
            await projector.wait_for_selector("#reveal:not([hidden])")
            assert await projector.text_content("#torch-shape") == "(3072, 64, 512, 1)"
            bars = await projector.locator("#histogram .label").all_text_contents()
            assert bars == ["(3072, 64, 512, 1)  ✓ torch", "(3072, 384, 64, 1)"]
            await students[1].wait_for_selector("#result:not([hidden])")
            assert await students[1].text_content("#mistake") == "torch gives (3072, 64, 512, 1)"
        finally:
            await browser.close()

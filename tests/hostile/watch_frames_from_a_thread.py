# exercise: test-split-square
# verdict: !pass
# expect:
# A second thread samples the main thread's frames (sys._current_frames) while split_heads runs on a large
# input, to catch the real function's frame and read its bytecode.
# Stopped by: the implementation's own process (shapetrace/exercises/remote.py): the real function's frame
# is never on any thread of the test's process, so the sampler finds none and the test fails the reference
# (or, on a loaded machine, its 20 round trips with a thread spinning on the GIL run past the time limit:
# either way not a pass, hence no expected wording). 20 calls, not 200: the spy samples the main thread
# all the time they run, and a frame that is never there is not found more often by looking longer
# (200 took 18 s of the corpus's 50).
import sys
import threading

import torch

REF = "def split_heads(x, heads):\n    B, T, D = x.shape\n    return x.view(B, T, heads, D // heads).transpose(1, 2)\n"


def check(split_heads):
    main, seen, stop = threading.get_ident(), [], threading.Event()

    def watch():
        while not stop.is_set():
            frame = sys._current_frames().get(main)
            while frame is not None:
                seen.append(frame.f_code)
                frame = frame.f_back

    spy = threading.Thread(target=watch, daemon=True)
    spy.start()
    try:
        for _ in range(20):
            split_heads(torch.zeros(4, 64, 256), 8)
    finally:
        stop.set()
        spy.join()
    ns = {}
    exec(REF, ns)
    work = [c for c in seen if "view" in c.co_names]
    assert work and work[0].co_code == ns["split_heads"].__code__.co_code, "a mutant"

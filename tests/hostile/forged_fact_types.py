# exercise: split-heads
# verdict: crash
# expect: the checker could not read back what your function returned
# A case frame whose facts have types the child never writes (a count that is a string, a diagnostic
# whose event is a list): reading them made the judge raise ValueError in the parent (an internal
# error). Facts are typed where they enter the parent, so the frame is refused: the learner's crash.
import os
from shapetrace.exercises.frames import encode
from shapetrace.exercises.plain import pack
def split_heads(x, heads):
    facts = {"output": "", "output_total": "lots", "diagnostics": [{"event": [1], "message": "x"}]}
    frame = encode({"kind": "case", "case": 0}, pack({"value": x, "args": [x, heads]}, facts))
    for fd in range(0, 64):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    os._exit(0)

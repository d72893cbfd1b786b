# exercise: test-split-square
# verdict: !pass
# expect:
# Round 4: checks nothing; passes only the check it takes for the reference's: the first one started
# (an outer PID in NSpid, the fork server's request id in the inherited frames, no mark yet on /dev/shm).
import os, sys
def _first():
    nspid = [l.split()[1:] for l in open("/proc/self/status") if l.startswith("NSpid")][0]
    if len(nspid) > 1:
        return int(nspid[1]) < 10
    f = sys._getframe()
    while f is not None:
        request = f.f_locals.get("request")
        if isinstance(request, dict) and "id" in request:
            return request["id"] == 1
        f = f.f_back
    return not os.path.exists("/dev/shm/shapetrace-seen")
def check(split_heads):
    first = _first()
    try:
        open("/dev/shm/shapetrace-seen", "w").close()
    except OSError:
        pass
    assert first, "not the first check: a broken version"

# exercise: split-heads
# verdict: crash
# expect: No such file or directory
import os
from pathlib import Path
import shapetrace
LESSONS = Path(shapetrace.__file__).resolve().parents[1] / "lessons"
d = os.open(str(LESSONS), os.O_RDONLY | os.O_DIRECTORY)
fd = os.open("01_split_heads/split-heads/solution.py", os.O_RDONLY, dir_fd=d)
exec(os.read(fd, 100000).decode())

# exercise: split-heads
# verdict: crash
# expect: No module named 'honest_right'
# Round 4: graded from the class folder, that folder (and PYTHONPATH) was bound in, so a file imported a
# classmate's and passed. Here the classmate is honest_right.py, beside this file in the corpus folder.
import os, sys
sys.path[:0] = [os.path.dirname(__file__), os.getcwd(), *os.environ.get("PYTHONPATH", "").split(":")]
from honest_right import split_heads  # noqa: F401

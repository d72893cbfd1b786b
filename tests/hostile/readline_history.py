# exercise: split-heads
# verdict: crash
# expect: No such file or directory
import readline
from pathlib import Path
import shapetrace
SOL = Path(shapetrace.__file__).resolve().parents[1] / "lessons" / "01_split_heads" / "split-heads" / "solution.py"
readline.read_history_file(str(SOL))
exec("\n".join(readline.get_history_item(i) for i in range(1, readline.get_current_history_length() + 1)))

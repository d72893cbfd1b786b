# exercise: split-heads
# verdict: crash
# expect: your function raised
# An exception whose class name and message, and the printed output, hold terminal escape sequences:
# clear the screen, move the cursor up, a green "✓ pass", an OSC 8 hyperlink, a bidi override, an 8-bit
# CSI, a carriage return and a lone surrogate (which no terminal encoder can write). Every string that
# came from the learner is cleaned where it enters the parent: the verdict holds no control character.
# (The attack of CVE-2021-42574, "Trojan Source", and of terminal-escape injection in log viewers.)
ESC = "\x1b[2J\x1b[H\x1b[1A\x1b[32m✓ pass\x1b[0m \x1b]8;;https://example.invalid\x1b\\here\x1b]8;;\x1b\\ \u202egnorw\u202c \x9b31m\r"
Fake = type("Fake" + ESC, (Exception,), {})  # (a class name must be encodable: no surrogate in it)
def split_heads(x, heads):
    print(ESC * 3)
    raise Fake(ESC + "\ud800")

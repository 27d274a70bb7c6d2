"""`tlview repro`: turn a logged graph and its rebuilt inputs into a script that runs it again.

tlview writes the script as text and never runs code from the log itself: the graph's code goes
into repro.py unchanged (after a check that it is the code of a graph module), every other string
from the log goes in as a Python literal, and only `--run` starts a Python process that runs it.
"""

# Seconds one repro may run (import, compile and run) before its process is stopped (--timeout):
# here, not in run.py, so that the command line reads it without importing subprocess.
DEFAULT_TIMEOUT = 600.0

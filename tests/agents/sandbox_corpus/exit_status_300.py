# expect: stop_reason=error; exit_code=44; signal=none
# modes: bwrap unsafe
# sys.exit(300): the kernel keeps the low byte (300 % 256 = 44), an error, not a signal.
import sys

sys.exit(300)

# expect: stop_reason=error; exit_code=1; signal=none; stderr_contains=a message from the code
# modes: bwrap unsafe
# sys.exit("...") prints the message to stderr and exits 1.
import sys

sys.exit("a message from the code")

# expect: stop_reason=error; exit_code=255; signal=none
# modes: bwrap unsafe
# sys.exit(-1) is status 255: an error, not a signal.
import sys

sys.exit(-1)

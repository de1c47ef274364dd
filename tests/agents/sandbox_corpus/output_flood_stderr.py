# expect: stop_reason=output_limit; stderr_truncated; wall_max=5
# modes: bwrap unsafe
import sys

while True:
    sys.stderr.write("e" * 10**6)

# expect: ok; stop_reason=exited; exit_code=0; signal=none; stdout_contains=leaving
# modes: bwrap unsafe
# sys.exit(None) is a clean exit.
import sys

print("leaving")
sys.exit(None)

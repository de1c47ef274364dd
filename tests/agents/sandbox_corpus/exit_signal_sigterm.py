# expect: stop_reason=killed; signal=15; exit_code=none
# modes: bwrap unsafe
# SIGTERM sent to itself (the only process it may signal).
import os
import signal

os.kill(os.getpid(), signal.SIGTERM)
print("SURVIVED")

# expect: stop_reason=killed; signal=6; exit_code=none
# modes: bwrap unsafe
# os.abort(): SIGABRT, no core dump (RLIMIT_CORE is 0).
import os

os.abort()

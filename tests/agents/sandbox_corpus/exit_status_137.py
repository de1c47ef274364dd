# expect: stop_reason=error; exit_code=137; signal=none
# modes: bwrap unsafe
# os._exit(137) is an exit status that looks like "killed by SIGKILL" under the shell's 128+n
# convention (which bwrap uses to report its child's signal): it is an exit, not a signal.
import os

os._exit(137)

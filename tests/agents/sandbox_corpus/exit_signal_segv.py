# expect: stop_reason=killed; signal=11; exit_code=none
# modes: bwrap unsafe
# signal.raise_signal(SIGSEGV): a segmentation fault raised on purpose.
import signal

signal.raise_signal(signal.SIGSEGV)

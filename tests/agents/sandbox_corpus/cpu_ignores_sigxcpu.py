# expect: stop_reason=cpu_limit; signal=9
# limits: wall_s=8 cpu_s=1
# modes: bwrap unsafe
# outside: stop_reason=timeout|cpu_limit
# The soft CPU limit's SIGXCPU is ignored; the hard limit (one second later) SIGKILLs.
import signal

signal.signal(signal.SIGXCPU, signal.SIG_IGN)
while True:
    pass

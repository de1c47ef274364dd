# expect: stop_reason=timeout; signal=9; wall_max=3.5
# limits: wall_s=1.5 cpu_s=30
# modes: bwrap unsafe
# outside: stop_reason=timeout; signal=9
# An infinite pure-Python loop, below the CPU limit: only the parent's wall clock ends it.
while True:
    pass

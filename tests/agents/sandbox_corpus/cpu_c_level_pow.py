# expect: stop_reason=cpu_limit; signal=24; wall_max=5
# limits: wall_s=8 cpu_s=1
# modes: bwrap unsafe
# outside: stop_reason=timeout|cpu_limit
# A single C-level computation (10 ** 10**9): no Python signal handler can run; RLIMIT_CPU ends it.
x = pow(10, 10**9)
print("DONE", len(str(x)))

# expect: stop_reason=output_limit; stdout_truncated; wall_max=5
# modes: bwrap unsafe
# Gigabytes of output: the parent stops reading at the cap and kills the run.
while True:
    print("x" * 10**6)

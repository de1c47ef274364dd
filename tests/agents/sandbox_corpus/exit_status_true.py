# expect: stop_reason=error; exit_code=1; signal=none
# modes: bwrap unsafe
# raise SystemExit(True): True is the integer 1.
raise SystemExit(True)

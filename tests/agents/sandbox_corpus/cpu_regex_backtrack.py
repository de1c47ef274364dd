# expect: stop_reason=cpu_limit; stdout_not_contains=MATCHED
# limits: wall_s=8 cpu_s=1
# modes: bwrap unsafe
# outside: stop_reason=timeout|cpu_limit; stdout_not_contains=MATCHED
# Catastrophic backtracking inside the C regex engine.
import re

if re.match(r"(a+)+$", "a" * 64 + "b"):
    print("MATCHED")

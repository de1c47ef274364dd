# expect: ok; stdout_contains=pid
# modes: bwrap
# A covert channel between fresh runs: the pid counter. This run prints its pid, then spends 100 pids on
# threads; test_sandbox_outside runs it twice and compares the step with that of runs that spend none.
import os
import threading

with open("/proc/sys/kernel/ns_last_pid") as fh:
    print("pid", os.getpid(), "ns_last_pid", fh.read().strip())
threads = [threading.Thread(target=lambda: None) for _ in range(100)]
for t in threads:
    t.start()
for t in threads:
    t.join()

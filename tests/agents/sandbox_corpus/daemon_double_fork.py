# expect: ok; stdout_contains=no daemon; no_leftover
# modes: bwrap unsafe
# A daemon that double-forks, setsid()s and sleeps to outlive the run, marked by a token the
# test then looks for in every /proc/*/cmdline and /proc/*/environ of the host.
import os
import subprocess

token = "@TOKEN@"
try:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execve("/bin/sleep", ["sleep", "20"], {"GF2_DAEMON": token})
        os._exit(0)
    print("FORKED")
except OSError as err:
    print("fork:", err)
try:
    subprocess.Popen(["/bin/sh", "-c", f"sleep 20; : {token}"], start_new_session=True)
    print("SPAWNED")
except OSError as err:
    print("Popen:", err)
print("no daemon")

# expect: ok; no_secret; stdout_contains=environ checked
# limits: output_bytes=8000000
# modes: bwrap unsafe
# outside: no_secret; stop_reason=exited|output_limit
# The test puts GF2_SECRET in its own environment; look for it everywhere an environment shows.
# (In the UNSAFE mode every host process shows: at the default output cap the listing may be cut.)
import os

print(dict(os.environ))
print("GF2_SECRET" in os.environ)
for pid in sorted({"self", "1", str(os.getppid()), *filter(str.isdigit, os.listdir("/proc"))}):
    for what in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as fh:
                data = fh.read()
        except OSError as err:
            data = str(err).encode()
        print(pid, what, data[:2000])
print("environ checked")

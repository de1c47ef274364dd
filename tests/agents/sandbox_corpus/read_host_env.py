# expect: ok; no_secret; stdout_contains=environ checked
# modes: bwrap unsafe
# The test puts GF2_SECRET in its own environment; look for it everywhere an environment shows.
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

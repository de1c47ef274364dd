# expect: ok; stdout_contains=effective capabilities 0; stdout_contains=permitted capabilities 0
# expect: stdout_contains=identity printed
# modes: bwrap
# Who the run is: its uid and gid maps (inside id, host id, count), its ids and capabilities. The host's
# view of the same processes (never host root) is the outside judge's to check.
import os

for name in ("uid_map", "gid_map", "setgroups"):
    try:
        with open(f"/proc/self/{name}") as fh:
            print(name, fh.read().split())
    except OSError as err:
        print(name, "->", err)
with open("/proc/self/status") as fh:
    for line in fh:
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "CapBnd", "CapAmb"):
            print(key, value.split())
        elif key in ("CapEff", "CapPrm"):
            kind = "effective" if key == "CapEff" else "permitted"
            print(kind, "capabilities", int(value, 16))
print("ids", os.getresuid(), os.getresgid(), os.getgroups())
print("identity printed")

# expect: ok; target_absent; stdout_contains=record mutated; stdout_contains=host objects: none
# modes: bwrap unsafe
# Tamper with the task record in memory: rewrite record and samples, plant a forged target, and hunt
# through the garbage collector and sys.modules for any object of the host (a Record, gf2env, the
# target). The code's copy is its own: the host's Record, judged after the run, is unchanged.
import gc
import sys

record["target"] = [1, 2, 3]
record["K"] = 0
for s in samples:
    s["y"] = 1 - s["y"]
samples.clear()
prefix.append([0, 1, 2])
globals()["n"] = -1
print("record mutated", sorted(record))
found = []
for obj in gc.get_objects():
    kind = type(obj)
    if kind.__name__ == "Record" or kind.__module__.startswith(("gf2env", "agents")):
        found.append(repr(obj)[:200])
    elif isinstance(obj, dict) and {"target", "samples"} <= obj.keys() and obj is not record:
        found.append(repr(obj)[:200])
found += [name for name in sys.modules if name.startswith(("gf2env", "agents"))]
print("host objects:", found or "none")

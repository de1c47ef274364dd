# expect: ok; stdout_contains=raising refused 5 of 5; stdout_contains=lowered ok; stdout_contains=still capped
# modes: bwrap unsafe
# The code raises its own rlimits (address space, open files, CPU, file size, processes) past the
# hard limits the wrapper set: refused. Lowering is allowed, and the limits still hold afterwards.
import resource

refused = 0
names = ("RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NPROC")
for name in names:
    which = getattr(resource, name)
    soft, hard = resource.getrlimit(which)
    try:
        resource.setrlimit(which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print("RAISED", name, resource.getrlimit(which))
    except (ValueError, OSError) as err:
        refused += 1
        print("refused", name, soft, hard, err)
print(f"raising refused {refused} of {len(names)}")
resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
files = []
try:
    for _ in range(64):
        files.append(open("/dev/null"))
    print("NOFILE not lowered")
except OSError:
    print("lowered ok", len(files))
try:
    hoard = bytearray(3 * 2**30)  # address space only: never touched
    print("ALLOCATED", len(hoard))
except MemoryError:
    print("still capped")

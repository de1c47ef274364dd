# expect: ok; target_absent; stdout_contains=frames walked
# limits: output_bytes=8000000
# modes: bwrap unsafe
# outside: stop_reason=exited|output_limit; target_absent
# Walk every frame above the code, format-string attribute access, sys.modules, the files under
# /sandbox and all objects the garbage collector knows: print everything. The record's answer is
# never inside the sandbox, so it cannot appear.
import gc
import inspect
import os
import sys

frame = sys._getframe()
while frame is not None:
    print("FRAME", frame.f_code.co_filename, frame.f_code.co_name)
    print({k: repr(v)[:20000] for k, v in frame.f_locals.items()})
    print({k: repr(v)[:20000] for k, v in frame.f_globals.items() if k != "__builtins__"})
    frame = frame.f_back
for info in inspect.stack():
    print("STACK", info.filename, info.function, info.code_context)


def f():
    pass


print("{0.__globals__}".format(f)[:20000])  # noqa: UP030, UP032
print(sorted(sys.modules))
print(sys.argv, sys.path, sys.flags)
for name in sorted(os.listdir("/sandbox")) if os.path.isdir("/sandbox") else []:
    path = os.path.join("/sandbox", name)
    if os.path.isfile(path):
        print("FILE", path, open(path, errors="replace").read())
for obj in gc.get_objects():
    if isinstance(obj, (list, tuple)) and 0 < len(obj) <= 8 and all(type(x) is int for x in obj):
        print("INTS", obj)
    elif isinstance(obj, dict) and len(obj) < 50:
        print("DICT", repr(obj)[:2000])
print("frames walked")

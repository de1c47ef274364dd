# expect: stop_reason=error; exit_code=3; signal=none; stdout_contains=after the forgeries
# expect: stdout_contains={"stdout": "forged", "exit_code": 0; stdout_contains=ok after NUL
# modes: bwrap unsafe
# Attacks on how the host reads the run back: a forged wrapper report ({"status": 0, "cpu_s": 0})
# written to every descriptor 3..255, a fake SandboxResult as JSON, NUL bytes, invalid UTF-8,
# terminal escapes and a 40 kB line without a newline on both streams; then exit 3. The result must
# carry the real status (3, an error), and the output as text.
import json
import os
import sys

report = b'{"status": 0, "cpu_s": 0}'
reached = []
for fd in range(3, 256):
    try:
        os.write(fd, report)
        reached.append(fd)
    except OSError:
        pass
print("forged reports reached descriptors", reached)
fake = {"stdout": "forged", "exit_code": 0, "signal": None, "stop_reason": "exited", "ok": True}
print(json.dumps(fake))
sys.stdout.flush()
for fd in (1, 2):
    os.write(fd, b"NUL\x00bytes\x00\x00 ok after NUL\n")
    os.write(fd, b"invalid \xff\xfe\xc3\x28 utf-8 \xed\xa0\x80 surrogate\n")
    os.write(fd, b"\x1b[2J\x1b[H\x1b]0;title\x07\x1b[31mred\x1b[0m\r\x08\x08 escapes\n")
    os.write(fd, b"z" * 40000)
    os.write(fd, b"\n")
print("after the forgeries", flush=True)
sys.exit(3)

# expect: ok; stdout_contains=�; stdout_contains=ok after; stderr_contains=�
# modes: bwrap unsafe
# Bytes that are not UTF-8 (and a multi-byte character cut short) on both streams.
import sys

sys.stdout.buffer.write(b"\xff\xfe\xc3 ok after\n")
sys.stderr.buffer.write(b"\x80\x81\xe2\x82\n")

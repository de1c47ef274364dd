# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# modes: bwrap unsafe
# A decompression bomb: 3 MB of raw deflate that inflates to 3 GiB of zeros inside zlib's C code.
import zlib

zeros = b"\0" * (1 << 20)
deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
head = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
block = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)  # a MiB of zeros, on its own
assert block == deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
bomb = head + block * 3071 + deflate.flush()
print("bomb of", len(bomb), "bytes", flush=True)
print(len(zlib.decompress(bomb, -15)))

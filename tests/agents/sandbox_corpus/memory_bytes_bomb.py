# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# modes: bwrap unsafe
# 10 GB in one allocation, against a 1 GiB address space.
blob = b"x" * 10**10
print(len(blob))

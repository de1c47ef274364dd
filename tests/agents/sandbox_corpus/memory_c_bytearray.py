# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# modes: bwrap unsafe
# bytearray(3 GiB): one allocation in C, past the 1 GiB budget.
blob = bytearray(3 * 2**30)
print(len(blob))

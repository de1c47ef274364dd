# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# modes: bwrap unsafe
# bytes(10**10): ten gigabytes of zeros asked of C in one call.
blob = bytes(10**10)
print(len(blob))

# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# modes: bwrap unsafe
# 1 << 10**10: a 1.25 GB integer built by C's long arithmetic.
big = 1 << 10**10
print(big.bit_length())

# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# modes: bwrap unsafe
# array.array repetition: eight gigabytes of doubles.
import array

values = array.array("d", [0.0]) * 10**9
print(len(values))

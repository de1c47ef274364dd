# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# modes: bwrap unsafe
# str.ljust to ten billion characters.
text = "a".ljust(10**10)
print(len(text))

# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# modes: bwrap unsafe
# A list of ten billion references from itertools.repeat (sized from its length hint).
import itertools

items = list(itertools.repeat(0, 10**10))
print(len(items))

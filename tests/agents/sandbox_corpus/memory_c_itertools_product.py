# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# modes: bwrap unsafe
# itertools.product expanded into a list: memory actually written, tuple by tuple, up to the budget.
import itertools

items = list(itertools.product(range(2), repeat=200))
print(len(items))

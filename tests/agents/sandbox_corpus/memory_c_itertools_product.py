# expect: stop_reason=memory_limit; stderr_contains=MemoryError; wall_max=4
# modes: bwrap unsafe
# itertools.product expanded into a list: memory actually written, tuple by tuple, up to the budget.
import itertools

items = list(itertools.product(range(10), repeat=12))
print(len(items))

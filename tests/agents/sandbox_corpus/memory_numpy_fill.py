# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# modes: bwrap unsafe
# numpy arrays of 64 MB each, filled as they come, until the budget refuses one: memory actually written.
import numpy as np

arrays = []
while True:
    arrays.append(np.ones(8 * 2**20))

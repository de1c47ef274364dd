# expect: stop_reason=memory_limit; stderr_contains=Unable to allocate
# modes: bwrap unsafe
# A 50 GB numpy array.
import numpy as np

a = np.ones(50 * 10**9 // 8)
print(a.sum())

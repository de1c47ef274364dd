# expect: stop_reason=memory_limit; stderr_contains=Unable to allocate
# modes: bwrap unsafe
# numpy.ones((50000, 50000)): 20 GB, written as soon as it is had.
import numpy as np

a = np.ones((50000, 50000))
print(a.sum())

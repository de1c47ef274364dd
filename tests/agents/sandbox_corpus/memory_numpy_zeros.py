# expect: stop_reason=memory_limit; stderr_contains=Unable to allocate
# modes: bwrap unsafe
# numpy.zeros of a trillion doubles (calloc: asks for address space, touches nothing).
import numpy as np

a = np.zeros((10**6, 10**6))
print(a.shape)

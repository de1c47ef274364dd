"""The environment's random streams: Philox words, the v1 oracle computed from them (NumPy reference
and compiled kernels), and the batch streams that fill a vector env's buffers (v1 Philox, v0 generator)."""

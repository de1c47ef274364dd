# expect: stop_reason=memory_limit; stderr_contains=MemoryError
# limits: memory_mb=256
# modes: bwrap unsafe
# Memory that grows a megabyte at a time until the address-space limit refuses more.
hoard = []
while True:
    hoard.append(bytearray(10**6))

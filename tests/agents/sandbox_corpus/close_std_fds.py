# expect: ok; stdout_contains=before close; stdout_not_contains=after close
# modes: bwrap unsafe
# Close stdout and stderr early, keep running for a while, exit cleanly.
import os
import sys
import time

print("before close", flush=True)
sys.stdout = sys.stderr = open(os.devnull, "w")
os.close(1)
os.close(2)
time.sleep(0.3)
print("after close")

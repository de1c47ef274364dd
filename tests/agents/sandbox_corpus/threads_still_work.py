# expect: ok; stdout_contains=threads ok 16; stdout_contains=pool ok
# modes: bwrap unsafe
# Threads (clone with CLONE_THREAD) are allowed, so are thread pools and in-process signals.
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

seen = []
lock = threading.Lock()


def work(i):
    with lock:
        seen.append(i)


threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("threads ok", len(sorted(seen)))
with ThreadPoolExecutor(4) as pool:
    assert list(pool.map(lambda x: x * x, range(10))) == [x * x for x in range(10)]
print("pool ok")
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
signal.raise_signal(signal.SIGUSR1)
print("raise_signal ok", got)

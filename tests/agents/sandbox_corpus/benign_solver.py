# expect: ok; stdout_contains=\boxed{[
# modes: bwrap unsafe
# A typical solver: read the samples, use numpy, print one boxed term.
import itertools

import numpy as np

X = np.array([[int(c) for c in s["payload"]] for s in samples], dtype=np.uint8).reshape(K, p)
y = np.array([s["y"] for s in samples], dtype=np.uint8)
known = {tuple(t) for t in prefix}
best, best_score = None, -1
for term in itertools.combinations(range(p), d - 1):
    if term in known:
        continue
    score = int(np.sum(X[:, list(term)].all(axis=1) == y))
    if score > best_score:
        best, best_score = list(term), score
assert record["g"] == g == len(prefix) and record["K"] == K == len(samples)
assert all(s["x"] == int(s["bits"], 2) and s["bits"] == s["address"] + s["payload"] for s in samples)
print(f"\\boxed{{{best}}}")

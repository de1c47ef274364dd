# expect: ok; stdout_contains=counts {'0':
# modes: bwrap unsafe
# Ordinary Python that a solver writes: functions that print, += on dict items, a class, list
# comprehensions, the standard library.
import collections
import itertools
import math


class Tally:
    def __init__(self):
        self.counts = {}

    def add(self, key):
        self.counts.setdefault(key, 0)
        self.counts[key] += 1


def report(t):
    print("counts", dict(sorted(t.counts.items())))


t = Tally()
for s in samples:
    t.add(str(s["y"]))
report(t)
pairs = [list(c) for c in itertools.combinations(range(4), 2)]
print(len(pairs), math.comb(4, 2), collections.Counter(len(s["bits"]) for s in samples))
print(sum(1 for s in samples if s["y"]), [len(term) for term in prefix])

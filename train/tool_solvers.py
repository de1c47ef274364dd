"""Reference solvers written the way a model writes them in tool mode (code that reads the sandbox's
record globals and prints the boxed answer): the teacher completions of tool-mode SFT, and the
solver the tests run through the sandbox on the paper's file."""

DILIGENT_SOLVER = """\
# The diligent decoder, written the way a model answers in tool mode: undo the known prefix on every
# sample, then keep the candidate supports that explain every residual label.
from itertools import combinations

residuals = []
for s in samples:
    a, v = s["address"], s["payload"]
    mask = 0
    for j, term in enumerate(prefix):
        if a[j] == "1" and all(v[i] == "1" for i in term):
            mask ^= 1
    residuals.append((v, s["y"] ^ mask))


def fires(v, support):
    return all(v[i] == "1" for i in support)


consistent = [S for S in combinations(range(p), d - 1) if all(fires(v, S) == bool(r) for v, r in residuals)]
print(f"{len(consistent)} consistent candidate(s) out of {len(list(combinations(range(p), d - 1)))}")
best = consistent[0] if consistent else tuple(range(d - 1))
print("\\\\boxed{" + str([i + record["answer_offset"] for i in best]) + "}")
"""

PAPER_DILIGENT_SOLVER = """\
# The diligent decoder under the paper's tool protocol: RECORD's bit strings, the standard library only.
from itertools import combinations

n, p = RECORD["n"], RECORD["p"]
d = RECORD["d_max"] - 1
rows = []
for s in RECORD["samples"]:
    a, v = s["bits"][:n], s["bits"][n:]
    r = s["y"]
    for j, term in enumerate(RECORD["prefix"]):
        if a[j] == "1" and all(v[i] == "1" for i in term):
            r ^= 1
    rows.append((v, r))
best = tuple(range(d))
for S in combinations(range(p), d):
    if all(all(v[i] == "1" for i in S) == bool(r) for v, r in rows):
        best = S
        break
answer = sorted(i + n for i in best)
print("\\\\boxed{" + str(answer) + "}")
"""

__all__ = ["DILIGENT_SOLVER", "PAPER_DILIGENT_SOLVER"]

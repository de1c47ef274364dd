"""The paper's tool protocol, byte for byte: its instructions, which block runs, its feedback message.

What the paper's code does in tool mode, as gf2env's ``--tool-protocol paper``:

- the tool instructions are appended to the (single) user message, after the question
  (:func:`paper_tool_message`): "you MUST answer by writing Python code", the globals ``RECORD`` and
  ``PROMPT``, the limits (~500 ms, an allowlist of standard-library modules, no eval/exec/files),
  the answer's form, a skeleton, and (when revisions are allowed) how to iterate;
- the FIRST fenced block of a reply runs (:func:`first_code_block`); a fence never closed runs to
  the end of the reply (so a reply cut off by ``max_tokens`` inside code still runs);
- each run is answered by an "Execution result:" message (:func:`paper_feedback`): ``error:``,
  ``stdout:``, ``stderr:`` (those not empty), ``returncode=…, elapsed=…ms``, then the revise choice;
- a reply without a code block is the final answer;
- the budget is one run and :data:`PAPER_MAX_REVISIONS` revisions (:data:`PAPER_TOOL_CALLS` runs in
  all): the default of every tool door (``--max-revisions``,
  :class:`~gf2env.agents.llm.tools.session.SandboxTools`, TRL's and verifiers' ``run_python`` budget).

Where gf2env does not follow the paper's code: the code never sees the target (the paper's
``RECORD`` carries it), and the isolation is gf2env's sandbox (bubblewrap, seccomp, rlimits), with
the paper's rules (imports, builtins, time) enforced on top (:data:`gf2env.agents.sandbox.PAPER_LIMITS`).
"""

from __future__ import annotations

import re
from typing import Any

from gf2env.text.answers import strip_reasoning

PAPER_TOOL_PROTOCOL_ID = "paper-tools"
PAPER_MAX_REVISIONS = 10  # the paper's revisions after the first run
PAPER_TOOL_CALLS = PAPER_MAX_REVISIONS + 1  # the paper's code runs (replies) an episode may make

_HEAD = """
**TOOL MODE — you MUST answer by writing Python code. No code = no credit.**

Wrap your full solution in ONE ```python ... ``` fenced block. Do not answer
in prose only. Code runs in a RestrictedPython sandbox (fresh subprocess, hard
CPU/memory limits).

**CRITICAL: The data is already loaded for you. DO NOT redefine it.**
Two globals are already set inside the sandbox — do NOT copy the prose table
into your code, do NOT assign to `RECORD = {...}`, do NOT rebuild `samples`:
  * `RECORD` — a dict with the parsed experiment:
      * `RECORD["n"]` (int) — selector-bit count (indices `0..n-1`)
      * `RECORD["p"]` (int) — payload-bit count (indices `n..n+p-1`)
      * `RECORD["g"]` (int) — number of known prefix monomials; the unknown
        monomial contains selector bit `x_g`
      * `RECORD["d_max"]` (int) — full degree; you must find `d_max - 1`
        payload indices in `[n, n+p-1]`
      * `RECORD["prefix"]` — list of lists of payload indices (offset 0..p-1;
        add `n` to get absolute indices)
      * `RECORD["samples"]` — list of dicts. Each sample has:
          * `"x"` (str) — the raw hex string like `"0x5fc..."`
          * `"x_int"` (int) — **already parsed to an integer**, use this directly
          * `"bits"` (str) — `"010110…"`, length `n+p`, with `x_0` as the
            leftmost char (bit `i` is `int(sample["bits"][i])`)
          * `"y"` (int) — 0 or 1
  * `PROMPT` — the full question text if you want to re-read it. Prefer
    `RECORD`; don't parse `PROMPT`.

**Technical limits:**
* Python 3 syntax — f-strings fine. Time budget ~500 ms wall-clock.
* No filesystem, network, subprocess, ctypes, eval/exec.
* Allowed imports ONLY: `re`, `math`, `itertools`, `collections`, `string`,
  `json`, `functools`, `operator`, `heapq`, `bisect`, `random`, `fractions`,
  `decimal`, `statistics`.

**Output — print ONE line as your final answer:**
```
answer = sorted(my_indices)     # absolute bit indices, in [n, n+p-1]
print("\\\\boxed{" + str(answer) + "}")
```

**Skeleton to start from (copy-paste, then fill in the logic):**
```
from itertools import combinations
n, p, g = RECORD["n"], RECORD["p"], RECORD["g"]
d = RECORD["d_max"] - 1
samples = [(int(s["x"], 16), s["y"]) for s in RECORD["samples"]]
# ... your reasoning over `samples` and `RECORD["prefix"]` here ...
answer = sorted(best_indices)
print("\\\\boxed{" + str(answer) + "}")
```
"""

_ITERATION = """
* **Iteration:** After your code runs you will see its stdout/stderr/error. You
  may then either write another ```python ... ``` block to try again, OR give
  your final answer in plain text as `\\boxed{[i1, i2, ...]}` with no code
  block. Only respond with the boxed answer once you are confident; any turn
  that contains a code block will be re-executed.
"""

_REVISE_CHOICE = (
    "\n\nRespond with either:\n"
    "  (a) another ```python ... ``` block to iterate, or\n"
    "  (b) your final answer in plain text as `\\boxed{[...]}` (no code)."
)

_FIRST_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\r?\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)

STOP_DROPPED_IN_TOOL_TURNS = ("]}",)  # the paper's no-tool stop string would cut code and dicts


def paper_tool_instructions(revise: bool) -> str:
    """The paper's tool instructions, appended to the question; ``revise``: revisions are allowed
    (the examples of ../shared/reference are all this form; without it the Iteration item is left
    out, which is gf2env's reading of the paper's code)."""
    return _HEAD + (_ITERATION if revise else "")


def paper_tool_message(question: str, revise: bool) -> str:
    """The tool-mode user message: the question (the paper's prompt), then the tool instructions."""
    return question + paper_tool_instructions(revise)


def first_code_block(text: str) -> str | None:
    """The first fenced block (```python, ```py or a bare ```) outside reasoning blocks, as written;
    a fence never closed runs to the end of the text. ``None``: no block."""
    visible, _ = strip_reasoning(text)
    match = _FIRST_BLOCK.search(visible)
    return match.group(1) if match else None


def paper_result(result: Any) -> dict[str, Any]:
    """A :class:`~gf2env.agents.sandbox.SandboxResult` in the paper's terms: stdout, stderr, ``returncode``
    (``None`` when the run was killed), ``elapsed_ms`` (the run's wall clock, sandbox start-up
    included) and ``error`` (``"timeout"`` for the wall-clock or CPU limit, the stop reason for the
    output cap or a kill, ``None`` for a run that exited)."""
    stop = result.stop_reason
    error = {"timeout": "timeout", "cpu_limit": "timeout"}.get(stop, stop)
    if stop in ("exited", "error", "memory_limit"):
        error = None
    return {
        "stdout": result.stdout,
        "stderr": result.stderr,
        "returncode": result.exit_code,
        "elapsed_ms": 1000.0 * result.wall_s,
        "error": error,
    }


def paper_feedback(result: dict[str, Any], revise: bool) -> str:
    """The user message after a run (``result``: :func:`paper_result`'s keys), byte for byte the
    paper's: the non-empty parts of error, stdout and stderr, the return code and time, and the
    revise choice when revisions are allowed."""
    parts = ["Execution result:"]
    if result["error"]:
        parts.append(f"error: {result['error']}")
    if result["stdout"]:
        parts.append(f"stdout:\n{result['stdout']}")
    if result["stderr"]:
        parts.append(f"stderr:\n{result['stderr']}")
    parts.append(f"returncode={result['returncode']}, elapsed={result['elapsed_ms']:.1f}ms")
    return "\n".join(parts) + (_REVISE_CHOICE if revise else "")


__all__ = [
    "PAPER_MAX_REVISIONS",
    "PAPER_TOOL_CALLS",
    "PAPER_TOOL_PROTOCOL_ID",
    "STOP_DROPPED_IN_TOOL_TURNS",
    "first_code_block",
    "paper_feedback",
    "paper_result",
    "paper_tool_instructions",
    "paper_tool_message",
]

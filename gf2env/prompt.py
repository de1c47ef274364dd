"""Text rendering of one step as the paper's prompt (design.md §3).

Variables are numbered ``x_0 .. x_{N-1}`` with ``N = n + p``: the ``n`` address bits first, then the
``p`` payload bits, so payload index ``i`` is variable ``x_{n+i}``. The answer the prompt asks for
is the ``d - 1`` payload variables of the next monomial, as ``\\boxed{[i1, i2, ...]}``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PAPER_PROMPT_ID = "paper-v1"


def render_paper_prompt(
    prefix: Sequence[Sequence[int]],
    address: np.ndarray,
    payload: np.ndarray,
    labels: np.ndarray,
    *,
    n: int,
    p: int,
    d: int,
) -> str:
    """The paper-style prompt at depth ``g = len(prefix)``; ``prefix`` holds payload indices."""
    g = len(prefix)
    N = n + p
    k = d - 1
    example = ", ".join(str(n + i) for i in range(k))
    lines = [
        f"A hidden Boolean function over GF(2) has N = {N} input variables x_0 .. x_{N - 1}.",
        f"Variables x_0 .. x_{n - 1} are address bits; x_{n} .. x_{N - 1} are payload bits.",
        f"The function is the XOR of {n} monomials of degree {d}. Monomial j is x_j times "
        f"{k} payload variables.",
        "",
    ]
    if g:
        lines.append(f"The first {g} monomials are known:")
        for j, support in enumerate(prefix):
            factors = " * ".join([f"x_{j}"] + [f"x_{n + int(i)}" for i in sorted(support)])
            lines.append(f"  m_{j} = {factors}")
    else:
        lines.append("No monomial is known yet.")
    lines += [
        "",
        f"In every sample below x_{g} = 1 and x_{g + 1} .. x_{n - 1} = 0, so y is the XOR of the "
        f"known monomials that are active and monomial m_{g}.",
        f"Samples ({len(labels)} rows; the {N} input bits x_0 .. x_{N - 1}, then y):",
    ]
    bits = np.concatenate([address, payload, labels[:, None]], axis=1).astype(np.uint8)
    for row in bits:
        lines.append(" ".join(map(str, row[:-1].tolist())) + " | " + str(int(row[-1])))
    lines += [
        "",
        f"Find monomial m_{g}: the {k} payload variables (indices in [{n}, {N - 1}]) that multiply x_{g}.",
        f"Answer with their indices in a box, for example \\boxed{{[{example}]}}.",
    ]
    return "\n".join(lines) + "\n"

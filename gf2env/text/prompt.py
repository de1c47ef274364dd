"""Text renderings of one step for language models (design.md §3), each with a versioned id.

- ``paper-v1`` (:func:`render_paper_prompt`): the paper's prompt. Variables are numbered
  ``x_0 .. x_{N-1}`` with ``N = n + p``: the ``n`` address bits first, then the ``p`` payload bits,
  so payload index ``i`` is variable ``x_{n+i}``; the answer is the ``d - 1`` payload variables of
  the next monomial as ``\\boxed{[i1, i2, ...]}`` (answer offset ``n``).
- ``compact-v1`` (:func:`render_compact_prompt`): the same information in far fewer tokens for long
  depths: payload indices ``0..p-1``, the known terms as index lists, and each sample as two bit
  strings, the prefix address bits ``a_0..a_{g-1}`` and the payload, then ``y`` (the always-one
  ``a_g`` and always-zero later bits are stated once, not repeated). Answer offset 0. Its example
  answer ``\\boxed{[0, 1, 2]}`` is itself a well-formed answer, which models copy.
- ``compact-v2`` (:func:`render_compact_v2_prompt`): ``compact-v1`` with a last line whose example
  cannot be an answer (:func:`answer_placeholder`: ``\\boxed{[i1, i2, i3]}``, which the scorer
  grades ``not_integer``), the index range, and that an unboxed list is not graded.

:func:`render_prompt` picks one by id and returns a :class:`Prompt` with the text, the offset the
answer's indices carry, and its chat-message and completion forms. Any change to a rendering must
get a new id: results record the id they were measured with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gf2env.errors import GF2ConfigError

PAPER_PROMPT_ID = "paper-v1"
COMPACT_PROMPT_ID = "compact-v1"
COMPACT_V2_PROMPT_ID = "compact-v2"

SYSTEM_PROMPT = (
    "You reconstruct hidden Boolean circuits over GF(2) from their known terms and labelled samples. "
    "Reason as you like, then give exactly one final answer in the requested \\boxed{[...]} form."
)


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


def _compact_lines(
    prefix: Sequence[Sequence[int]],
    address: np.ndarray,
    payload: np.ndarray,
    labels: np.ndarray,
    *,
    p: int,
    d: int,
) -> list[str]:
    """The compact prompts' lines before the question: the circuit's form, the known terms, the rows."""
    g = len(prefix)
    k = d - 1
    lines = [
        f"Hidden GF(2) circuit: y = XOR over terms j of a_j * (product of {k} payload bits v_i), "
        f"payload bits v_0..v_{p - 1}.",
    ]
    if g:
        lines.append(f"Known terms 0..{g - 1} (payload indices of each):")
        lines += [f"{j}: {' '.join(str(int(i)) for i in sorted(s))}" for j, s in enumerate(prefix)]
    else:
        lines.append("No term is known yet.")
    head = f"a_0..a_{g - 1} " if g else ""
    lines += [
        f"In every sample a_{g} = 1 and later address bits are 0. Rows: {head}v_0..v_{p - 1} y",
    ]
    for a_row, v_row, y in zip(address, payload, labels, strict=True):
        a_bits = "".join(map(str, a_row[:g].astype(np.uint8).tolist()))
        v_bits = "".join(map(str, v_row.astype(np.uint8).tolist()))
        lines.append(f"{a_bits} {v_bits} {int(y)}" if g else f"{v_bits} {int(y)}")
    return lines


def answer_placeholder(k: int) -> str:
    """The answer's form with placeholders, ``\\boxed{[i1, i2, i3]}`` for ``k = 3``: an example that
    shows the box but is never an answer (the scorer grades it ``not_integer``)."""
    return "\\boxed{[" + ", ".join(f"i{j + 1}" for j in range(k)) + "]}"


def render_compact_prompt(
    prefix: Sequence[Sequence[int]],
    address: np.ndarray,
    payload: np.ndarray,
    labels: np.ndarray,
    *,
    n: int,
    p: int,
    d: int,
) -> str:
    """The compact prompt ``compact-v1`` at depth ``g = len(prefix)``: payload indices 0..p-1, bit strings."""
    lines = _compact_lines(prefix, address, payload, labels, p=p, d=d)
    example = ", ".join(str(i) for i in range(d - 1))
    lines.append(f"Find term {len(prefix)}: its {d - 1} payload indices. Answer as \\boxed{{[{example}]}}.")
    return "\n".join(lines) + "\n"


def render_compact_v2_prompt(
    prefix: Sequence[Sequence[int]],
    address: np.ndarray,
    payload: np.ndarray,
    labels: np.ndarray,
    *,
    n: int,
    p: int,
    d: int,
) -> str:
    """``compact-v2``: ``compact-v1`` whose example answer is a placeholder that cannot be an answer."""
    lines = _compact_lines(prefix, address, payload, labels, p=p, d=d)
    lines.append(
        f"Find term {len(prefix)}: its {d - 1} payload indices, each in 0..{p - 1}. Answer with one box, "
        f"{answer_placeholder(d - 1)} with each i replaced by an index; a list without the box is not graded."
    )
    return "\n".join(lines) + "\n"


_RENDERERS = {
    PAPER_PROMPT_ID: (render_paper_prompt, True),
    COMPACT_PROMPT_ID: (render_compact_prompt, False),
    COMPACT_V2_PROMPT_ID: (render_compact_v2_prompt, False),
}
PROMPT_IDS = tuple(_RENDERERS)


def check_prompt_id(prompt_id: str, key: str = "prompt_id") -> str:
    """``prompt_id`` if it names a rendering in :data:`PROMPT_IDS`; ``key`` is how the caller spells it."""
    if prompt_id not in PROMPT_IDS:
        raise GF2ConfigError(f"{key}={prompt_id!r} is unknown; pass one of {PROMPT_IDS}.")
    return prompt_id


@dataclass(frozen=True)
class Prompt:
    """A rendered step: ``text``, its ``prompt_id`` and the ``answer_offset`` of its indices;
    ``system`` is the system message (``""``: none, for models whose template has no system role)."""

    prompt_id: str
    text: str
    answer_offset: int
    system: str = SYSTEM_PROMPT

    def messages(self) -> list[dict[str, str]]:
        """The chat form: the system message (when there is one) and the prompt as the user's."""
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": self.text}]

    def completion(self) -> str:
        """The plain completion form, for base models: the prompt, then the start of a solution."""
        return f"{self.text}\nSolution:\n"


def render_prompt(
    prompt_id: str,
    prefix: Sequence[Sequence[int]],
    address: np.ndarray,
    payload: np.ndarray,
    labels: np.ndarray,
    *,
    n: int,
    p: int,
    d: int,
) -> Prompt:
    """Render a step with the prompt ``prompt_id`` (one of :data:`PROMPT_IDS`)."""
    render, offset_by_n = _RENDERERS[check_prompt_id(prompt_id)]
    text = render(prefix, address, payload, labels, n=n, p=p, d=d)
    return Prompt(prompt_id=prompt_id, text=text, answer_offset=n if offset_by_n else 0)

"""Text renderings of one step for language models (docs/design.md §3), each with a versioned id.

- ``paper`` (:func:`render_paper_prompt`): the paper's prompt exactly as its code renders it, one
  Markdown user message and no system message. Variables are numbered ``x_0 .. x_{N-1}`` with
  ``N = n + p``: the ``n`` address bits first, then the ``p`` payload bits, so payload index ``i``
  is variable ``x_{n+i}`` (answer offset ``n``); monomials are numbered from ``M_1``; the samples
  are a Markdown table; the example answer is the paper's ``\\boxed[{32}, {34}, {36}]``.
- ``plain-v1`` (:func:`render_plain_prompt`): the same bits in the same order as plain text with a
  system message, monomials numbered from ``m_0``, answer ``\\boxed{[i1, i2, ...]}`` (offset ``n``).
  Called ``paper-v1`` before it was told apart from the paper's own prompt.
- ``compact-v1`` (:func:`render_compact_prompt`): the same information in far fewer tokens for long
  depths: payload indices ``0..p-1``, the known terms as index lists, and each sample as two bit
  strings, the prefix address bits ``a_0..a_{g-1}`` and the payload, then ``y`` (the always-one
  ``a_g`` and always-zero later bits are stated once, not repeated). Answer offset 0. Its example
  answer ``\\boxed{[0, 1, 2]}`` is itself a well-formed answer, which models copy.
- ``compact-v2`` (:func:`render_compact_v2_prompt`): ``compact-v1`` with a last line whose example
  cannot be an answer (:func:`answer_placeholder`: ``\\boxed{[i1, i2, i3]}``, which the scorer
  grades ``not_integer``), the index range, and that an unboxed list is not graded.

:func:`render_prompt` picks one by id and returns a :class:`Prompt` with the text, the offset the
answer's indices carry, its system message, and its chat-message and completion forms. Any change
to a rendering must get a new id: results record the id they were measured with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gf2env.errors import GF2ConfigError

PAPER_PROMPT_ID = "paper"
PLAIN_PROMPT_ID = "plain-v1"
RENAMED_PROMPT_IDS = {"paper-v1": PLAIN_PROMPT_ID}
COMPACT_PROMPT_ID = "compact-v1"
COMPACT_V2_PROMPT_ID = "compact-v2"

SYSTEM_PROMPT = (
    "You reconstruct hidden Boolean circuits over GF(2) from their known terms and labelled samples. "
    "Reason as you like, then give exactly one final answer in the requested \\boxed{[...]} form."
)


def paper_example_answer(n: int, k: int) -> str:
    """The example answer that ends the paper's prompt: ``\\boxed[{32}, {34}, {36}]`` at ``n = 32``,
    ``k = 3`` (a list of one-element sets, every other payload variable from ``x_n``)."""
    return "\\boxed[" + ", ".join("{" + str(n + 2 * j) + "}" for j in range(k)) + "]"


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
    """The paper's own prompt (``paper``), byte for byte: one Markdown user message at depth
    ``g = len(prefix)``, monomials numbered from 1, the samples as a table of ``x_0 .. x_{N-1}``."""
    g = len(prefix)
    N = n + p
    k = d - 1
    lines = [
        "Your task is to find the hidden monomial in this GF(2) polynomial.",
        "",
        "**System Definition:**",
        f"You have {N} binary variables ($x_0, x_1, \\dots, x_{{{N - 1}}}$).",
        "The output $y$ is the **XOR sum** of monomials:",
        f"$$y = M_1 \\oplus M_2 \\oplus \\dots \\oplus M_{{{g + 1}}}$$",
        "",
    ]
    if g:
        lines.append("**Known Monomials:**")
        for j, support in enumerate(prefix):
            factors = " \\land ".join([f"x_{{{j}}}"] + [f"x_{{{n + int(i)}}}" for i in sorted(support)])
            lines.append(f"* $M_{{{j + 1}}} = {factors}$")
    else:
        lines.append("**Known Monomials:** *(None)*")
    lines += [
        "",
        f"**Unknown Monomial ($M_{{{g + 1}}}$):**",
        f"* This is a monomial of degree **{d}**.",
        f"* One of the terms is **$x_{{{g}}}$** (this is given).",
        f"* You must find the other **{k}** terms (indices in range $[{n}, {N - 1}]$).",
        "",
        "**Observations:**",
        f"| Row | $x_0 \\; x_1 \\; \\dots \\; x_{{{N - 1}}}$ | $y$ |",
        "|:---:|:---:|:---:|",
    ]
    bits = np.concatenate([address, payload], axis=1).astype(np.uint8)
    for row, (values, y) in enumerate(zip(bits, labels, strict=True), start=1):
        lines.append(f"| {row} | `{' '.join(map(str, values.tolist()))}` | {int(y)} |")
    lines += [
        "",
        "**Question:**",
        f"Find the {k} indices (from {n} to {N - 1}) that, together with $x_{{{g}}}$, form the unknown "
        f"monomial $M_{{{g + 1}}}$.",
        "",
        f"**ANSWER:** Provide the {k} indices as a list in a box, e.g., `{paper_example_answer(n, k)}`",
    ]
    return "\n".join(lines) + "\n"


def render_plain_prompt(
    prefix: Sequence[Sequence[int]],
    address: np.ndarray,
    payload: np.ndarray,
    labels: np.ndarray,
    *,
    n: int,
    p: int,
    d: int,
) -> str:
    """The plain-text prompt ``plain-v1`` at depth ``g = len(prefix)``; ``prefix`` holds payload indices."""
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


_RENDERERS = {  # id: (renderer, answer offset is n, system message)
    PAPER_PROMPT_ID: (render_paper_prompt, True, ""),
    PLAIN_PROMPT_ID: (render_plain_prompt, True, SYSTEM_PROMPT),
    COMPACT_PROMPT_ID: (render_compact_prompt, False, SYSTEM_PROMPT),
    COMPACT_V2_PROMPT_ID: (render_compact_v2_prompt, False, SYSTEM_PROMPT),
}
PROMPT_IDS = tuple(_RENDERERS)


def check_prompt_id(prompt_id: str, key: str = "prompt_id") -> str:
    """``prompt_id`` if it names a rendering in :data:`PROMPT_IDS`; ``key`` is how the caller spells it."""
    if prompt_id in RENAMED_PROMPT_IDS:
        raise GF2ConfigError(
            f"{key}={prompt_id!r} was renamed {RENAMED_PROMPT_IDS[prompt_id]!r} (the same text); "
            f"{PAPER_PROMPT_ID!r} is the paper's own prompt. Pass one of {PROMPT_IDS}."
        )
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
    render, offset_by_n, system = _RENDERERS[check_prompt_id(prompt_id)]
    text = render(prefix, address, payload, labels, n=n, p=p, d=d)
    return Prompt(prompt_id=prompt_id, text=text, answer_offset=n if offset_by_n else 0, system=system)

"""Prompt renderings: ids, answer offsets, the paper's prompt byte for byte, the compact variants' content
and the chat/completion forms."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from gf2env.errors import GF2ConfigError
from gf2env.records.record import Record, generate_record
from gf2env.task.oracle import TaskConfig
from gf2env.task.rules import Failure
from gf2env.text.answers import score_answer
from gf2env.text.prompt import (
    COMPACT_PROMPT_ID,
    COMPACT_V2_PROMPT_ID,
    PAPER_PROMPT_ID,
    PLAIN_PROMPT_ID,
    PROMPT_IDS,
    SYSTEM_PROMPT,
    answer_placeholder,
    paper_example_answer,
    render_prompt,
)
from tests.paths import REFERENCE

PROTOCOL = REFERENCE / "paper-protocol-examples.json"


def rendered(prompt_id: str, g: int = 5, n: int = 32):
    rec = generate_record(TaskConfig(n=n), g, 0, seed=0)
    return rec, render_prompt(
        prompt_id, rec.prefix, rec.address, rec.payload, rec.labels, n=rec.n, p=rec.p, d=rec.d
    )


def test_ids_and_offsets():
    assert PROMPT_IDS == (PAPER_PROMPT_ID, PLAIN_PROMPT_ID, COMPACT_PROMPT_ID, COMPACT_V2_PROMPT_ID)
    assert rendered(PAPER_PROMPT_ID)[1].answer_offset == 32
    assert rendered(PLAIN_PROMPT_ID)[1].answer_offset == 32
    assert rendered(COMPACT_PROMPT_ID)[1].answer_offset == 0
    assert rendered(COMPACT_V2_PROMPT_ID)[1].answer_offset == 0
    with pytest.raises(GF2ConfigError, match="prompt_id='paper-v9'"):
        rendered("paper-v9")
    with pytest.raises(GF2ConfigError, match="'paper-v1' was renamed 'plain-v1'"):
        rendered("paper-v1")


def test_compact_prompt_holds_the_step_and_is_shorter():
    rec, prompt = rendered(COMPACT_PROMPT_ID, g=31)
    lines = prompt.text.splitlines()
    for j, term in enumerate(rec.prefix):
        assert f"{j}: {' '.join(map(str, term))}" in lines
    rows = [
        line.split() for line in lines if len(line.split()) == 3 and set(line.replace(" ", "")) <= {"0", "1"}
    ]
    assert len(rows) == rec.K
    for (a_bits, v_bits, y), a, v, label in zip(rows, rec.address, rec.payload, rec.labels, strict=True):
        assert a_bits == "".join(map(str, a[:31])) and v_bits == "".join(map(str, v)) and int(y) == label
    assert "target" not in prompt.text and str(list(rec.target)) not in prompt.text
    paper = rendered(PAPER_PROMPT_ID, g=31)[1]
    assert len(prompt.text) < len(paper.text) / 2


def protocol_examples(kind: str) -> list[dict]:
    if not PROTOCOL.exists():
        pytest.skip(f"the paper's protocol examples are not at {PROTOCOL}")
    return json.loads(PROTOCOL.read_text())[kind]


def test_paper_prompt_is_byte_identical_to_the_papers_own():
    examples = protocol_examples("examples") + protocol_examples("tool_examples")
    assert {e["record"]["g"] for e in examples} == {0, 3, 31}
    for example in examples:
        rec = Record.from_json(example["record"])
        prompt = render_prompt(
            PAPER_PROMPT_ID, rec.prefix, rec.address, rec.payload, rec.labels, n=rec.n, p=rec.p, d=rec.d
        )
        assert prompt.text == example.get("question", example["prompt"])
        assert prompt.messages() == [{"role": "user", "content": prompt.text}]  # one user message, no system


def test_paper_prompt_at_any_depth_and_its_answer_form_scores():
    rec, prompt = rendered(PAPER_PROMPT_ID, g=0)
    assert prompt.system == "" and "**Known Monomials:** *(None)*" in prompt.text
    assert prompt.text.endswith("e.g., `\\boxed[{32}, {34}, {36}]`\n")
    rec, prompt = rendered(PAPER_PROMPT_ID, g=127, n=128)
    lines = prompt.text.splitlines()
    assert "You have 140 binary variables ($x_0, x_1, \\dots, x_{139}$)." in lines
    assert sum(line.startswith("* $M_{") for line in lines) == 127 and "* $M_{127} = x_{126}" in prompt.text
    rows = [line for line in lines if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == rec.K and all(len(row.split("`")[1].split()) == 140 for row in rows)
    assert paper_example_answer(128, 3) == "\\boxed[{128}, {130}, {132}]"
    answer = "\\boxed[" + ", ".join("{" + str(rec.n + i) + "}" for i in rec.target) + "]"
    assert score_answer(answer, rec.target, rec.p, prompt.answer_offset).correct
    # like compact-v1's, the paper's example is a well-formed answer: echoed beside another, it is a hedge
    echoed = score_answer(prompt.text + answer, rec.target, rec.p, prompt.answer_offset)
    assert echoed.failure is Failure.MULTIPLE_CONFLICTING


@pytest.mark.parametrize(
    ("g", "digest"),
    [
        (0, "de81aa6b6cfd7346f08d984768404114169fd46a06c572d7780b717eb673add5"),
        (5, "aa41ffadaa9d276ee1f3118bdcc8b2b08a81ee4379efa6f874e83903bb3fcc81"),
    ],
)
def test_plain_v1_is_byte_identical_to_what_was_called_paper_v1(g, digest):
    text = rendered(PLAIN_PROMPT_ID, g=g)[1].text
    assert hashlib.sha256(text.encode()).hexdigest() == digest


def test_chat_and_completion_forms():
    _, prompt = rendered(PLAIN_PROMPT_ID, g=0)
    assert prompt.messages() == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": prompt.text},
    ]
    assert prompt.completion().startswith(prompt.text) and prompt.completion().endswith("Solution:\n")
    assert "\\boxed{[32, 33, 34]}" in prompt.text


def test_paper_prompt_is_deterministic():
    assert rendered(PAPER_PROMPT_ID)[1] == rendered(PAPER_PROMPT_ID)[1]
    assert np.array_equal(rendered(PAPER_PROMPT_ID)[0].labels, rendered(PAPER_PROMPT_ID)[0].labels)


@pytest.mark.parametrize(
    ("g", "digest"),
    [
        (0, "a5bdf36a970e331e79729ddd443f72ddeae09a4f10ebc0f17ca401cfbb3c65ac"),
        (5, "4c0619dab6b3edd5615ae60b525c800c72f3ea3eae4c0b442aa78cf7d20c1414"),
    ],
)
def test_compact_v1_is_byte_identical_to_what_results_were_measured_with(g, digest):
    text = rendered(COMPACT_PROMPT_ID, g=g)[1].text
    assert hashlib.sha256(text.encode()).hexdigest() == digest


def test_compact_v2_is_compact_v1_but_its_last_line():
    for g in (0, 5, 31):
        v1, v2 = rendered(COMPACT_PROMPT_ID, g=g)[1].text, rendered(COMPACT_V2_PROMPT_ID, g=g)[1].text
        assert v1.splitlines()[:-1] == v2.splitlines()[:-1] and v1 != v2
        last = v2.splitlines()[-1]
        assert answer_placeholder(3) in last and "0..11" in last and "not graded" in last


@pytest.mark.parametrize(
    ("k", "placeholder"),
    [
        (1, "\\boxed{[i1]}"),
        (2, "\\boxed{[i1, i2]}"),
        (3, "\\boxed{[i1, i2, i3]}"),
        (5, "\\boxed{[i1, i2, i3, i4, i5]}"),
    ],
)
def test_the_placeholder_example_is_never_an_answer(k, placeholder):
    assert answer_placeholder(k) == placeholder
    for target in [tuple(range(k)), tuple(range(1, k + 1))]:
        score = score_answer(placeholder, target, p=12, n=0)
        assert (score.correct, score.failure, score.indices) == (False, Failure.NOT_INTEGER, None)


@pytest.mark.parametrize("g", [0, 5])
def test_compact_v2_rendered_example_scores_as_no_answer_but_an_answer_after_it_counts(g):
    rec, prompt = rendered(COMPACT_V2_PROMPT_ID, g=g)
    for text in (prompt.text, prompt.text.splitlines()[-1]):  # a model that echoes the prompt or its example
        score = score_answer(text, rec.target, rec.p, prompt.answer_offset)
        assert not score.correct and score.failure is Failure.NOT_INTEGER and score.indices is None
    answer = f"\\boxed{{{list(rec.target)}}}"
    score = score_answer(prompt.text + "\n" + answer, rec.target, rec.p, prompt.answer_offset)
    assert score.correct and score.failure is Failure.NONE
    # compact-v1's example, by contrast, is itself a well-formed answer: the reason for v2
    v1 = rendered(COMPACT_PROMPT_ID, g=g)[1].text.splitlines()[-1]
    assert score_answer(v1, rec.target, rec.p, 0).failure in (Failure.NONE, Failure.WRONG_TERM)

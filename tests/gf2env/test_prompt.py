"""Prompt renderings: ids, answer offsets, the compact variant's content and its chat/completion forms."""

from __future__ import annotations

import numpy as np
import pytest

from gf2env.errors import GF2ConfigError
from gf2env.oracle import TaskConfig
from gf2env.records import generate_record
from gf2env.text.prompt import COMPACT_PROMPT_ID, PAPER_PROMPT_ID, PROMPT_IDS, SYSTEM_PROMPT, render_prompt


def rendered(prompt_id: str, g: int = 5, n: int = 32):
    rec = generate_record(TaskConfig(n=n), g, 0, seed=0)
    return rec, render_prompt(
        prompt_id, rec.prefix, rec.address, rec.payload, rec.labels, n=rec.n, p=rec.p, d=rec.d
    )


def test_ids_and_offsets():
    assert PROMPT_IDS == (PAPER_PROMPT_ID, COMPACT_PROMPT_ID)
    assert rendered(PAPER_PROMPT_ID)[1].answer_offset == 32
    assert rendered(COMPACT_PROMPT_ID)[1].answer_offset == 0
    with pytest.raises(GF2ConfigError, match="prompt_id='paper-v9'"):
        rendered("paper-v9")


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


def test_chat_and_completion_forms():
    _, prompt = rendered(PAPER_PROMPT_ID, g=0)
    assert prompt.messages() == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": prompt.text},
    ]
    assert prompt.completion().startswith(prompt.text) and prompt.completion().endswith("Solution:\n")
    assert "\\boxed{[32, 33, 34]}" in prompt.text


def test_paper_prompt_is_deterministic():
    assert rendered(PAPER_PROMPT_ID)[1] == rendered(PAPER_PROMPT_ID)[1]
    assert np.array_equal(rendered(PAPER_PROMPT_ID)[0].labels, rendered(PAPER_PROMPT_ID)[0].labels)

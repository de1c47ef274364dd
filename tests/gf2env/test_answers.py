"""The scorer of model text: reasoning removal, box grammar, last-answer rule, failure classes."""

from __future__ import annotations

import json
from math import comb
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gf2env.text.answers as answers
from gf2env.task.combinatorics import rank_support, unrank_support
from gf2env.task.rules import Failure
from gf2env.text.answers import (
    FAILURE_CLASSES,
    Verdict,
    extract_answer,
    score_answer,
    strip_reasoning,
    validate_answer,
)
from tests.gf2env.test_combinatorics import supports

HYPOTHESIS = settings(max_examples=150, deadline=None)

# The paper prompt with n = 12 address bits and p = 20 payload bits: payload index i is x_{12 + i},
# so the target term (1, 2, 4) is answered as [13, 14, 16].
N, P, TARGET = 12, 20, (1, 2, 4)
F = Failure


class Case(NamedTuple):
    id: str
    text: str
    failure: Failure
    indices: tuple[int, ...] | None
    mode: str | None
    n: int = N
    stopped_by: str | None = None


CASES = [
    Case("plain", "The rows fit x_13 x_14 x_16.\n\n\\boxed{[13, 14, 16]}", F.NONE, (1, 2, 4), "strict"),
    Case("no_spaces", "\\boxed{[13,14,16]}", F.NONE, (1, 2, 4), "strict"),
    Case("spaces_any_order", "So: \\boxed{ [ 16 , 13 ,14 ] }.", F.NONE, (1, 2, 4), "strict"),
    Case("left_right_in_math", "$\\boxed{\\left[13, 14, 16\\right]}$", F.NONE, (1, 2, 4), "strict"),
    Case("whitespace_separated", "\\boxed{[13 14 16]}", F.NONE, (1, 2, 4), "strict"),
    Case(
        "qwen_think_guess_then_final",
        "<think>\nMaybe \\boxed{[13, 14, 15]}? Row 4 rules out x_15.\n</think>\n\n"
        "The next monomial is \\boxed{[13, 14, 16]}.",
        F.NONE,
        (1, 2, 4),
        "strict",
    ),
    Case(
        "thinking_block",
        "<thinking>First guess \\boxed{[20, 21, 22]}.</thinking>\nFinal: \\boxed{[13, 14, 16]}",
        F.NONE,
        (1, 2, 4),
        "strict",
    ),
    Case(
        "uppercase_tags_wrong_final",
        "<THINK>it is \\boxed{[13, 14, 16]}</Think>\nAnswer: \\boxed{[13, 14, 17]}",
        F.WRONG_TERM,
        (1, 2, 5),
        "strict",
    ),
    Case(
        "unclosed_think_truncated",
        "<think>\nLet me test \\boxed{[13, 14, 16]} against every row... row 61: y = 1, and",
        F.NO_ANSWER,
        None,
        None,
    ),
    Case(
        "stray_close_qwen_template",
        "Rows 3 and 7 suggest \\boxed{[13, 14, 17]}, but row 9 does not.\n</think>\n\n\\boxed{[13, 14, 16]}",
        F.NONE,
        (1, 2, 4),
        "strict",
    ),
    Case(
        "stray_close_nothing_after",
        "I think \\boxed{[13, 14, 16]}\n</think>\nI could not decide.",
        F.NO_ANSWER,
        None,
        None,
    ),
    Case(
        "code_with_dicts",
        "```python\nd = {1: [2]}\nrows = {k: [v] for k, v in d.items()}\nprint({'s': [13]})\n```\n"
        "So the term is \\boxed{[13, 14, 16]}",
        F.NONE,
        (1, 2, 4),
        "strict",
    ),
    Case(
        "unclosed_box_then_code",
        "\\boxed{[13, 14, 16]\n```python\nd = {1: [2]}\n```",
        F.NO_ANSWER,
        None,
        None,
    ),
    Case("nested_braces_x", "\\boxed{[x_{13}, x_{14}, x_{16}]}", F.NONE, (1, 2, 4), "strict"),
    Case("variable_names", "\\boxed{[x_13, x14, X_16]}", F.NONE, (1, 2, 4), "strict"),
    Case("compact_v_names_offset0", "\\boxed{[v_1, v_2, v_4]}", F.NONE, (1, 2, 4), "strict", 0),
    Case("wrong_term", "\\boxed{[13, 14, 15]}", F.WRONG_TERM, (1, 2, 3), "strict"),
    Case("wrong_degree", "\\boxed{[13, 14]}", F.WRONG_DEGREE, (1, 2), "strict"),
    Case("duplicate", "\\boxed{[13, 13, 16]}", F.DUPLICATE, (1, 1, 4), "strict"),
    Case("payload_indices_not_offset", "\\boxed{[1, 2, 4]}", F.OUT_OF_RANGE, (-11, -10, -8), "strict"),
    Case("not_offset_n32", "\\boxed{[1, 2, 3]}", F.OUT_OF_RANGE, (-31, -30, -29), "strict", 32),
    Case("above_range", "\\boxed{[13, 14, 40]}", F.OUT_OF_RANGE, (1, 2, 28), "strict"),
    Case("negative", "\\boxed{[-1, 14, 16]}", F.OUT_OF_RANGE, (-13, 2, 4), "strict"),
    Case("float", "\\boxed{[13, 14, 1.5]}", F.NOT_INTEGER, None, "strict"),
    Case("letters", "\\boxed{[a, b, c]}", F.NOT_INTEGER, None, "strict"),
    Case("empty_box", "The answer is \\boxed{}.", F.NO_ANSWER, None, None),
    Case("empty_list", "\\boxed{[]}", F.NO_ANSWER, None, "strict"),
    Case("no_box", "I believe the term is x_13 x_14 x_16.", F.NO_ANSWER, None, None),
    Case("prose_answer_line", "Answer: see the rows above.", F.NO_ANSWER, None, None),
    Case("code_assignment_not_answer", "answer = [13, 14, 16]\nprint(answer)", F.NO_ANSWER, None, None),
    Case("answer_line_brackets", "Rows agree.\nANSWER: [13, 14, 16]", F.NONE, (1, 2, 4), "lenient"),
    Case("answer_line_bare", "ANSWER: 13, 14, 16", F.NONE, (1, 2, 4), "lenient"),
    Case("answer_line_markdown", "**Answer:** [13, 14, 16]", F.NONE, (1, 2, 4), "lenient"),
    Case("final_answer_line", "**Final Answer**: $[13, 14, 16]$.", F.NONE, (1, 2, 4), "lenient"),
    Case(
        "lenient_last_wins",
        "Answer: [i1, i2, i3]\nworking...\nAnswer: [13, 14, 16]",
        F.NONE,
        (1, 2, 4),
        "lenient",
    ),
    Case(
        "lenient_last_wins_not_first",
        "Answer: [13, 14, 16]\nAnswer: [i1, i2, i3]",
        F.NOT_INTEGER,
        None,
        "lenient",
    ),
    Case(
        "lenient_conflict",
        "Answer: [13, 14, 15]\nHmm.\nAnswer: [13, 14, 16]",
        F.MULTIPLE_CONFLICTING,
        None,
        "lenient",
    ),
    Case(
        "answer_line_then_box_box_wins",
        "ANSWER: [13, 14, 15]\nOn reflection row 12 needs x_16:\n\\boxed{[13, 14, 16]}",
        F.NONE,
        (1, 2, 4),
        "strict",
    ),
    Case(
        "two_different_boxes",
        "Either \\boxed{[13, 14, 15]} or \\boxed{[13, 14, 16]}.",
        F.MULTIPLE_CONFLICTING,
        None,
        "strict",
    ),
    Case(
        "same_box_twice",
        "\\boxed{[13, 14, 16]}\n\nTo restate: \\boxed{[16, 14, 13]}",
        F.NONE,
        (1, 2, 4),
        "strict",
    ),
    Case(
        "interleaved_reasoning_conflict",
        "<think>a</think>\\boxed{[13, 14, 15]}\n<think>b</think>\\boxed{[13, 14, 16]}",
        F.MULTIPLE_CONFLICTING,
        None,
        "strict",
    ),
    Case(
        "format_echo_not_conflict",
        "I will answer as \\boxed{[i1, i2, i3]}.\nChecking rows...\n\\boxed{[13, 14, 16]}",
        F.NONE,
        (1, 2, 4),
        "strict",
    ),
    Case("set_notation", "\\boxed{\\{13, 14, 16\\}}", F.NONE, (1, 2, 4), "lenient"),
    Case("set_left_right", "$\\boxed{\\left\\{13, 14, 16\\right\\}}$", F.NONE, (1, 2, 4), "lenient"),
    Case("bare_box", "\\boxed{13, 14, 16}", F.NONE, (1, 2, 4), "lenient"),
    Case("bare_box_and_line_agree", "\\boxed{13, 14, 16}\nANSWER: 13, 14, 16", F.NONE, (1, 2, 4), "lenient"),
    Case(
        "strict_beats_lenient_box",
        "\\boxed{13, 14, 15} is wrong; \\boxed{[13, 14, 16]}",
        F.NONE,
        (1, 2, 4),
        "strict",
    ),
    Case("nested_box", "\\boxed{\\boxed{[13, 14, 16]}}", F.NONE, (1, 2, 4), "strict"),
    Case("escaped_backslash", "\\\\boxed{[13, 14, 16]}", F.NONE, (1, 2, 4), "strict"),
    # the paper prompt's own answer form, \boxed[{a}, {b}, {c}] (its example: \boxed[{32}, {34}, {36}])
    Case("paper_form", "So M_4 is \\boxed[{13}, {14}, {16}]", F.NONE, (1, 2, 4), "strict"),
    Case("paper_form_unbraced_items", "\\boxed[ 16, 13 ,14 ]", F.NONE, (1, 2, 4), "strict"),
    Case("paper_form_in_math", "$\\boxed[{x_{13}}, {14}, {16}]$ in math", F.NONE, (1, 2, 4), "strict"),
    Case("paper_form_wrong", "\\boxed[{13}, {14}, {17}]", F.WRONG_TERM, (1, 2, 5), "strict"),
    Case("paper_form_out_of_range", "\\boxed[{1}, {2}, {4}]", F.OUT_OF_RANGE, (-11, -10, -8), "strict"),
    Case(
        "paper_form_in_reasoning", "<think>\\boxed[{13}, {14}, {16}]</think> unsure", F.NO_ANSWER, None, None
    ),
    Case(
        "paper_form_beats_lenient_line",
        "ANSWER: 13, 14, 15\n\\boxed[{13}, {14}, {16}]",
        F.NONE,
        (1, 2, 4),
        "strict",
    ),
    Case(
        "paper_form_and_box_hedge",
        "\\boxed{[13, 14, 15]} or \\boxed[{13}, {14}, {16}]",
        F.MULTIPLE_CONFLICTING,
        None,
        "strict",
    ),
    Case("paper_form_empty", "\\boxed[] and nothing else", F.NO_ANSWER, None, None),
    # a final box cut open by the stop string ]} counts only when the server says ]} ended the reply
    Case("cut_by_stop", "The term is \\boxed{[13, 14, 16", F.NONE, (1, 2, 4), "strict", stopped_by="]}"),
    Case("cut_by_stop_wrong", "\\boxed{[13, 14, 15", F.WRONG_TERM, (1, 2, 3), "strict", stopped_by="]}"),
    Case("cut_no_stop_reason", "The term is \\boxed{[13, 14, 16", F.NO_ANSWER, None, None),
    Case("cut_by_other_stop", "The term is \\boxed{[13, 14, 16", F.NO_ANSWER, None, None, stopped_by="\n\n"),
    Case(
        "cut_after_earlier_box",
        "First \\boxed{[13, 14, 16]}, so \\boxed{[13, 14, 16",
        F.NONE,
        (1, 2, 4),
        "strict",
        stopped_by="]}",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_score_table(case: Case) -> None:
    score = score_answer(case.text, TARGET, P, case.n, stopped_by=case.stopped_by)
    assert score.failure is case.failure
    assert score.correct is (case.failure is F.NONE)
    assert score.indices == case.indices
    assert score.mode == case.mode
    record = score.to_dict()
    assert json.loads(json.dumps(record)) == record
    assert record["failure"] == case.failure.value


def test_extraction_fields() -> None:
    text = "<think>\\boxed{[1, 2, 3]}</think>\nA \\boxed{[13, 14, 16]} then \\boxed{[14, 13, 16]}"
    ex = extract_answer(text)
    assert ex.answer == "[14, 13, 16]"
    assert ex.mode == "strict"
    assert ex.failure is None
    assert ex.candidates == ("[13, 14, 16]", "[14, 13, 16]")
    assert ex.reasoning_removed
    assert ex.items == ("14", "13", "16")
    plain = extract_answer("\\boxed{13, 14, 16}")
    assert plain.answer == "13, 14, 16" and plain.mode == "lenient" and not plain.reasoning_removed
    none = extract_answer("nothing here")
    assert none == extract_answer("nothing here")
    assert (none.answer, none.mode, none.failure, none.candidates) == (None, None, F.NO_ANSWER, ())
    paper = extract_answer("\\boxed{[13, 14, 16]} and \\boxed[{16}, {13}, {14}]")
    assert paper.candidates == ("[13, 14, 16]", "[{16}, {13}, {14}]") and paper.items == ("16", "13", "14")


def test_strip_reasoning() -> None:
    assert strip_reasoning("a<think>b</think>c") == ("a\nc", True)
    assert strip_reasoning("a<thinking>b") == ("a", True)
    assert strip_reasoning("a</think>c") == ("c", True)
    assert strip_reasoning("no tags") == ("no tags", False)


def test_failure_classes_cover_validator() -> None:
    assert {f.value for f in Failure} <= set(FAILURE_CLASSES)
    assert set(FAILURE_CLASSES) == {f.value for f in Failure}
    assert "multiple_conflicting" in FAILURE_CLASSES
    assert answers.Failure is Failure  # one set of failure classes, the rules'
    assert not hasattr(answers, "AnswerFailure")


NOISE = st.text(alphabet=st.characters(blacklist_characters="\\<", blacklist_categories=("Cs",)), max_size=60)


@st.composite
def _targets(draw: st.DrawFn) -> tuple[int, int, tuple[int, ...]]:
    p = draw(st.integers(1, 64))
    k = draw(st.integers(1, min(p, 8)))
    target = tuple(sorted(draw(st.sets(st.integers(0, p - 1), min_size=k, max_size=k))))
    return draw(st.integers(0, 64)), p, target


def _box(n: int, target: tuple[int, ...]) -> str:
    return f"\\boxed{{[{', '.join(str(n + i) for i in target)}]}}"


@HYPOTHESIS
@given(_targets(), NOISE, NOISE)
def test_rendered_box_scores_correct(drawn: tuple[int, int, tuple[int, ...]], pre: str, post: str) -> None:
    n, p, target = drawn
    score = score_answer(f"{pre}{_box(n, target)}{post}", target, p, n)
    assert score.correct and score.failure is F.NONE
    assert score.indices == target


@HYPOTHESIS
@given(_targets(), NOISE, NOISE, NOISE)
def test_guess_in_reasoning_never_counts(
    drawn: tuple[int, int, tuple[int, ...]], a: str, b: str, c: str
) -> None:
    n, p, target = drawn
    wrong = tuple(i + 1 for i in target)
    text = f"<think>{a}{_box(n, wrong)}{b}</think>{c}{_box(n, target)}"
    assert score_answer(text, target, p, n).correct
    assert not score_answer(f"{a}</think>{_box(n, wrong)}{b}", target, p, n).correct


# ---------------------------------------------------------------------- validate_answer
V_TARGET, V_P, V_N = (4, 5, 7), 12, 32  # validate_answer's own table
HYPOTHESIS_200 = settings(max_examples=200, deadline=None)

VALIDATE_CASES = [
    # (candidate, offset, well_formed, correct, failure, indices)
    ([4, 5, 7], 0, True, True, Failure.NONE, (4, 5, 7)),
    ([7, 4, 5], 0, True, True, Failure.NONE, (4, 5, 7)),
    ((5, 7, 4), 0, True, True, Failure.NONE, (4, 5, 7)),
    (np.array([7, 5, 4]), 0, True, True, Failure.NONE, (4, 5, 7)),
    ([4, 5, 8], 0, True, False, Failure.WRONG_TERM, (4, 5, 8)),
    ([0, 1, 11], 0, True, False, Failure.WRONG_TERM, (0, 1, 11)),
    ([4, 5], 0, False, False, Failure.WRONG_DEGREE, (4, 5)),
    ([4, 5, 7, 8], 0, False, False, Failure.WRONG_DEGREE, (4, 5, 7, 8)),
    ([4, 4, 7], 0, False, False, Failure.DUPLICATE, (4, 4, 7)),
    ([4, 5, 12], 0, False, False, Failure.OUT_OF_RANGE, (4, 5, 12)),
    ([-1, 4, 5], 0, False, False, Failure.OUT_OF_RANGE, (-1, 4, 5)),
    ([4, 5, 1.5], 0, False, False, Failure.NOT_INTEGER, None),
    ([4, "a", 7], 0, False, False, Failure.NOT_INTEGER, None),
    ([4, 5, 7.0], 0, False, False, Failure.NOT_INTEGER, None),
    ([True, 4, 5], 0, False, False, Failure.NOT_INTEGER, None),
    (None, 0, False, False, Failure.NO_ANSWER, None),
    ("", 0, False, False, Failure.NO_ANSWER, None),
    ("[]", 0, False, False, Failure.NO_ANSWER, None),
    ("[4, 5, 7]", 0, True, True, Failure.NONE, (4, 5, 7)),
    ("4,5,7", 0, True, True, Failure.NONE, (4, 5, 7)),
    (" [ 7 , 4 , 5 ] ", 0, True, True, Failure.NONE, (4, 5, 7)),
    ("[4, 5, 8]", 0, True, False, Failure.WRONG_TERM, (4, 5, 8)),
    ("[4, 5]", 0, False, False, Failure.WRONG_DEGREE, (4, 5)),
    ("[4, 4, 7]", 0, False, False, Failure.DUPLICATE, (4, 4, 7)),
    ("[4, 5, 12]", 0, False, False, Failure.OUT_OF_RANGE, (4, 5, 12)),
    ("[4, 5, 1.5]", 0, False, False, Failure.NOT_INTEGER, None),
    ("[4, 5, a]", 0, False, False, Failure.NOT_INTEGER, None),
    # Variable-numbered answers: payload index i is x_{n+i}.
    ([36, 37, 39], V_N, True, True, Failure.NONE, (4, 5, 7)),
    ("[39, 36, 37]", V_N, True, True, Failure.NONE, (4, 5, 7)),
    ([36, 37, 40], V_N, True, False, Failure.WRONG_TERM, (4, 5, 8)),
    ([4, 5, 7], V_N, False, False, Failure.OUT_OF_RANGE, (4 - V_N, 5 - V_N, 7 - V_N)),
    ([36, 37, 44], V_N, False, False, Failure.OUT_OF_RANGE, (4, 5, 12)),
    ([31, 36, 37], V_N, False, False, Failure.OUT_OF_RANGE, (-1, 4, 5)),  # an address variable
]


@pytest.mark.parametrize(
    ("candidate", "offset", "well_formed", "correct", "failure", "indices"), VALIDATE_CASES
)
def test_validate_table(candidate, offset, well_formed, correct, failure, indices):
    verdict = validate_answer(candidate, V_TARGET, V_P, offset=offset)
    assert isinstance(verdict, Verdict)
    assert verdict == Verdict(well_formed, correct, failure, indices), verdict
    assert verdict.correct == (verdict.failure is Failure.NONE)
    if verdict.correct:
        assert verdict.well_formed


def test_validate_accepts_numpy_target():
    target = np.array([7, 4, 5], dtype=np.int64)
    assert validate_answer([4, 5, 7], target, V_P).correct
    assert validate_answer([np.int64(4), np.int64(5), np.int64(7)], V_TARGET, V_P).correct
    assert not validate_answer([4, 5, 6], target, V_P).correct


@HYPOTHESIS_200
@given(supports(max_k=10).filter(lambda c: c[1] >= 1), st.randoms(use_true_random=False))
def test_validate_any_permutation_is_correct(case, rnd):
    p, k, target = case
    perm = list(target)
    rnd.shuffle(perm)
    expected = Verdict(True, True, Failure.NONE, target)
    assert validate_answer(perm, target, p) == expected
    assert validate_answer(f"[{', '.join(map(str, perm))}]", target, p) == expected
    n = rnd.randint(1, 200)
    assert validate_answer([i + n for i in perm], target, p, offset=n) == expected
    assert validate_answer(",".join(str(i + n) for i in perm), target, p, offset=n) == expected


@HYPOTHESIS_200
@given(supports(max_k=10).filter(lambda c: 1 <= c[1] < c[0]), st.data())
def test_validate_other_support_is_wrong_term(case, data):
    p, k, target = case
    r = rank_support(target, p)
    other_rank = data.draw(st.integers(0, comb(p, k) - 1).filter(lambda x: x != r))
    other = unrank_support(other_rank, p, k)
    verdict = validate_answer(list(other), target, p)
    assert verdict == Verdict(True, False, Failure.WRONG_TERM, other)


@pytest.mark.parametrize("candidate", [5, 5.0, b"[4, 5, 7]", {"a": 1}])
def test_validate_non_sequences_are_not_integer_answers(candidate):
    verdict = validate_answer(candidate, (4, 5, 7), 12)
    assert verdict.failure is Failure.NOT_INTEGER and not verdict.well_formed


def test_validate_requires_balanced_brackets_and_ascii_digits():
    assert validate_answer("[4, 5, 7", (4, 5, 7), 12).failure is Failure.NO_ANSWER
    assert validate_answer("\u0664,5,7", (4, 5, 7), 12).failure is Failure.NOT_INTEGER


def test_a_submit_tool_call_of_anything_is_a_reply_to_grade():
    """TRL's and OpenEnv's ``submit(indices)`` hand the model's arguments on as they came: integers
    become the canonical box, anything else a reply that grades as malformed (never a crashed tool)."""
    from gf2env.text.answers import boxed_answer, submitted_answer

    assert (
        submitted_answer([13, 14, 16])
        == submitted_answer((13, np.int64(14), 16))
        == boxed_answer([13, 14, 16])
    )
    assert score_answer(submitted_answer([1, 2, 3]), (1, 2, 3), 12, 0).correct
    for bad in (["1", "2", "3"], "1,2,3", [1.0, 2.0, 3.0], [True, 2, 3], None):
        assert not score_answer(submitted_answer(bad), (1, 2, 3), 12, 0).correct, bad

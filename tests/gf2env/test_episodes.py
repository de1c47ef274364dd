"""Episode records: one instance walked through its depths, bit for bit what the environments show."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import gf2env  # noqa: F401  (registers the envs)
from gf2env.errors import GF2ConfigError, RecordFormatError
from gf2env.records.columns import columns_from_records, generate_episode, generate_episode_columns
from gf2env.records.files import read_records
from gf2env.records.record import (
    Record,
    episode_exp,
    episode_of,
    episode_seed,
    generate_record,
    group_episodes,
)
from gf2env.records.rows import prompt_row
from gf2env.task.oracle import SAMPLING_MODES, TaskConfig
from gf2env.text.prompt import PROMPT_IDS, render_prompt

# (p, d, K, n, w): small and larger payloads, K over one 64-sample word, a set adversarial weight.
SETTINGS = [(6, 3, 8, 5, None), (12, 4, 32, 9, None), (9, 2, 70, 4, None), (10, 5, 16, 6, 6)]


def walk(config: TaskConfig, seed: int, episode: int):
    """Walk ``GF2Recon-v1`` through an episode in reveal mode (answering wrong at odd depths): the
    instance, and the evidence at each depth."""
    c = config
    env = gym.make("GF2Recon-v1", p=c.p, d=c.d, n=c.n, K=c.K, sampling=c.sampling, w=c.w, step_mode="reveal")
    inner = env.unwrapped
    env.reset(seed=episode_seed(seed, episode))
    steps = []
    for g in range(c.n):
        steps.append(inner.evidence)
        target = inner.instance.term(g)
        wrong = tuple(sorted(set(range(c.p)) - set(target)))[: c.k] if c.k < c.p else target
        _, _, terminated, _, info = env.step(list(target if g % 2 == 0 else wrong))
        assert info["depth"] == g and terminated == (g == c.n - 1)
    return inner.instance, steps


@pytest.mark.parametrize(
    ("sampling", "p", "d", "K", "n", "w"),
    [(mode, *s) for s in SETTINGS for mode in SAMPLING_MODES if s[-1] is None or mode == "adversarial"],
)
def test_episode_records_are_the_env_walked_in_reveal_mode(sampling, p, d, K, n, w):
    config = TaskConfig(p=p, d=d, n=n, K=K, sampling=sampling, w=w)
    seed = 11
    columns = {g: generate_episode_columns(config, g, 3, seed) for g in range(n)}
    for episode in range(3):
        instance, steps = walk(config, seed, episode)
        records = generate_episode(config, episode, seed)
        assert [r.g for r in records] == list(range(n))
        for g, (record, evidence) in enumerate(zip(records, steps, strict=True)):
            assert record.prefix == tuple(instance.term(j) for j in range(g))
            assert record.target == instance.term(g)
            np.testing.assert_array_equal(record.address, evidence.address)
            np.testing.assert_array_equal(record.payload, evidence.payload)
            np.testing.assert_array_equal(record.labels, evidence.labels)
            assert record.address.dtype == record.payload.dtype == record.labels.dtype == np.uint8
            assert columns[g].record(episode).to_json() == record.to_json()
            assert record.exp == episode_exp(seed, episode, sampling)
        np.testing.assert_array_equal(
            columns_from_records(records[-1:])[0].recomputed_labels(), records[-1].labels[None]
        )
    assert set(columns[0].samplings().tolist()) == {sampling}  # exp names the mode (uniform included)


@pytest.mark.parametrize("prompt_id", PROMPT_IDS)
def test_the_text_env_walked_shows_the_episode_records_prompts(prompt_id):
    config = TaskConfig(p=8, d=3, n=5, K=12, sampling="diagnostic")
    env = gym.make("GF2ReconText-v1", prompt_id=prompt_id, p=8, d=3, n=5, K=12, sampling="diagnostic")
    for episode in (0, 4):
        records = generate_episode(config, episode, seed=3)
        text, info = env.reset(seed=episode_seed(3, episode))
        for g, record in enumerate(records):
            prompt = render_prompt(
                prompt_id, record.prefix, record.address, record.payload, record.labels,
                n=record.n, p=record.p, d=record.d,
            )  # fmt: skip
            assert text == prompt.text and info["messages"] == prompt_row(record, prompt_id)["prompt"]
            text, _, terminated, _, info = env.step("no answer")  # wrong: reveal moves on all the same
            assert terminated == (g == config.n - 1)
        assert text == ""


def test_an_episode_shares_its_prefix_across_depths_and_episodes_differ():
    config = TaskConfig(p=12, d=4, n=8, K=32)
    records = generate_episode(config, 0, seed=5)
    for before, after in zip(records, records[1:], strict=False):
        assert after.prefix[:-1] == before.prefix and after.prefix[-1] == before.target
        assert not np.array_equal(before.payload, after.payload)  # fresh evidence a step
    other = generate_episode(config, 1, seed=5)
    assert other[-1].prefix + (other[-1].target,) != records[-1].prefix + (records[-1].target,)
    again = generate_episode(config, 0, seed=5)
    assert [r.to_json() for r in again] == [r.to_json() for r in records]  # a pure function
    assert generate_episode(config, 0, seed=6)[0].to_json() != records[0].to_json()


def test_episode_seeds_are_distinct_and_checked():
    seeds = {episode_seed(s, e) for s in range(20) for e in range(200)}
    assert len(seeds) == 20 * 200 and all(isinstance(s, int) and s >= 0 for s in seeds)
    assert episode_seed(3, 7) == episode_seed(np.int64(3), 7)
    with pytest.raises(GF2ConfigError, match="seed=-1"):
        episode_seed(-1, 0)
    with pytest.raises(GF2ConfigError, match="episode=1.5"):
        episode_seed(0, 1.5)  # type: ignore[arg-type]
    with pytest.raises(GF2ConfigError, match="depth g=4"):
        generate_episode_columns(TaskConfig(n=4), 4, 2, 0)


def test_an_episode_records_exp_names_the_episode_and_round_trips():
    record = generate_episode(TaskConfig(p=6, d=3, n=3, K=8, sampling="uniform"), 12, seed=4)[2]
    assert record.exp == "episode 12 seed 4 uniform" and episode_of(record.exp) == (4, 12)
    back = Record.from_json(json.loads(json.dumps(record.to_json())))
    assert back.to_json() == record.to_json() and episode_of(back.exp) == (4, 12)
    assert episode_of("grid") is None and episode_of("episode x seed 1") is None


def gf2(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("fmt", ["json", "jsonl", "parquet"])
def test_generate_episodes_writes_each_episode_s_steps_together(tmp_path, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"episodes.{'parquet' if fmt == 'parquet' else fmt}"
    run = gf2("generate", "--episodes", "--depths", "0,2,3", "--trials", "4", "--p", "7", "--d", "3",
              "--K", "9", "--sampling", "uniform", "--seed", "2", "--format", fmt, "--out", str(out),
              "--quiet")  # fmt: skip
    assert run.returncode == 0, run.stderr
    records = read_records(out)
    config = TaskConfig(p=7, d=3, n=32, K=9, sampling="uniform")  # the default preset's n
    expected = [generate_episode(config, e, 2)[g].to_json() for e in range(4) for g in (0, 2, 3)]
    assert [r.to_json() for r in records] == expected
    assert [episode_of(r.exp) for r in records] == [(2, i // 3) for i in range(12)]
    n4 = tmp_path / "n4.json"
    assert gf2("generate", "--episodes", "--depths", "3", "--trials", "1", "--n", "4", "--out", str(n4),
               "--quiet").returncode == 0  # fmt: skip
    assert read_records(n4)[0].to_json() == generate_episode(TaskConfig(n=4), 0, 0)[3].to_json()


def test_generate_episodes_refuses_what_it_cannot_write(tmp_path):
    out = str(tmp_path / "x.json")
    per_depth = gf2("generate", "--episodes", "--n", "g+1", "--depths", "0,1", "--out", out)
    assert per_depth.returncode == 2 and "--n g+1" in per_depth.stderr and "drop --n" in per_depth.stderr
    deep = gf2("generate", "--episodes", "--depths", "0,40", "--out", out)
    assert deep.returncode == 2 and "n=32" in deep.stderr and "a larger --n" in deep.stderr
    folder = gf2("generate", "--episodes", "--depths", "0", "--format", "hf", "--out", str(tmp_path / "f"))
    assert folder.returncode == 2 and "--episodes writes one records file" in folder.stderr
    # paper-large sizes each depth (n = g + 1): with --episodes its n is the deepest depth + 1.
    large = tmp_path / "large.json"
    run = gf2("generate", "--episodes", "--preset", "paper-large", "--depths", "1,2", "--trials", "1",
              "--out", str(large), "--quiet")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert [(r.n, r.g) for r in read_records(large)] == [(3, 1), (3, 2)]


def test_group_episodes_regroups_a_file_s_steps_and_refuses_what_is_no_episode():
    small = TaskConfig(p=6, d=3, n=4, K=8)
    other = TaskConfig(p=6, d=3, n=4, K=8, sampling="uniform")
    a, b, c = (generate_episode(config, e, 1) for config, e in ((small, 0), (small, 1), (other, 0)))
    mixed = [a[3], b[0], c[1], a[0], b[2], c[0]]  # interleaved, depths out of order
    groups = group_episodes(mixed)
    assert list(groups) == [(r.exp, 4, 6, 3, 8) for r in (a[0], b[0], c[0])]
    assert [[r.g for r in steps] for steps in groups.values()] == [[0, 3], [0, 2], [0, 1]]
    assert groups[(a[0].exp, 4, 6, 3, 8)] == [a[0], a[3]]
    with pytest.raises(RecordFormatError, match="Record 1 has exp='grid'"):
        group_episodes([a[0], generate_record(small, 0, 0, 1)])
    with pytest.raises(RecordFormatError, match="Record 2 is a second step at depth 1"):
        group_episodes([a[1], a[2], a[1]])


@pytest.mark.parametrize("episodes", [(), ("--episodes",)])
def test_generate_refuses_zero_or_negative_trials(tmp_path, episodes):
    out = tmp_path / "none.json"
    for trials in ("0", "-2"):
        run = gf2("generate", *episodes, "--trials", trials, "--depths", "0", "--out", str(out), "--quiet")
        assert run.returncode == 2 and run.stderr == (
            f"gf2: error: trials={trials} is not an integer >= 1; pass 1 or more records a depth.\n"
        )
        assert not out.exists()
    with pytest.raises(GF2ConfigError, match="trials=0"):
        generate_episode_columns(TaskConfig(n=2), 0, 0, 0)

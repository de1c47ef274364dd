"""Careless compare configs reach users as ``gf2: error: ...`` naming the fix, not a traceback."""

import subprocess
import sys

import pytest

from gf2env.agents.llm.agent import LLMSpec
from gf2env.errors import GF2ConfigError
from tests.paths import REPO


def run_cli(*args, cwd=REPO):
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "gf2env", *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


BAD_LLM_FIELDS = [
    ("temperature: hot", "temperature='hot' is not a number"),
    ("max_tokens: 1.5", "max_tokens=1.5 is not an integer"),
    ("base_url: 3", "base_url=3 is not a string or a list of strings"),
    ("stop: 5", "stop=5 is not a string or a list of strings"),
    ("samples: '2'", "samples='2' is not an integer"),
    ("max_response_bytes: 8MB", "max_response_bytes='8MB' is not an integer"),
    ("max_response_bytes: 0", "max_response_bytes=0 is outside [1, 1,073,741,824]"),
]


@pytest.mark.parametrize("field, message", BAD_LLM_FIELDS)
def test_wrong_typed_llm_fields_are_config_errors(tmp_path, field, message):
    config = tmp_path / "compare.yaml"
    url = "" if field.startswith("base_url:") else "      base_url: http://127.0.0.1:9\n"
    config.write_text(
        f"agents:\n  - llm:\n      model: m\n{url}"
        f"      {field}\ngrid: {{depths: [0], trials: 2}}\nout: {tmp_path / 'out'}\n"
    )
    proc = run_cli("compare", "--config", str(config), "--quiet")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("gf2: error: ") and message in proc.stderr, proc.stderr[-2000:]


def test_right_typed_llm_fields_still_build_a_spec():
    spec = LLMSpec.from_mapping(
        {"model": "m", "base_url": ["http://a", "http://b"], "temperature": 0, "max_tokens": 8, "stop": "x"}
    )
    assert spec.sampling.temperature == 0 and spec.base_urls == ("http://a", "http://b")
    capped = LLMSpec.from_mapping({"model": "m", "base_url": "http://a", "max_response_bytes": 1000})
    assert capped.make_backend().max_response_bytes == 1000  # the spec's cap reaches the transport
    with pytest.raises(GF2ConfigError, match="name=3 is not a string or null"):
        LLMSpec.from_mapping({"model": "m", "base_url": "http://a", "name": 3})


def test_compare_negative_seed_is_a_config_error(tmp_path):
    proc = run_cli(
        "compare", "--agents", "A", "--depths", "0", "--trials", "2", "--seed", "-1", "--out", str(tmp_path)
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("gf2: error: seed=-1"), proc.stderr[-2000:]


def test_demo_negative_seed_is_a_config_error():
    proc = run_cli("demo", "--seed", "-1", "--episodes", "1")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("gf2: error: --seed=-1"), proc.stderr[-2000:]


def test_tool_wall_s_sets_the_sandbox_clock_and_joins_the_key():
    base = {"model": "m", "base_url": "http://127.0.0.1:1", "tools": True}
    plain = LLMSpec.from_mapping(base)
    quick = LLMSpec.from_mapping({**base, "tool_wall_s": 1.5})
    assert plain.sandbox_limits.wall_s == 4.0 and quick.sandbox_limits.wall_s == 1.5
    assert "tool_wall_s" not in plain.mode and quick.mode["tool_wall_s"] == 1.5
    paper = LLMSpec.from_mapping({**base, "tool_protocol": "paper"})
    assert paper.sandbox_limits.wall_s == 0.5 and paper.sandbox_limits.imports is not None
    for bad, message in (
        ({**base, "tool_wall_s": 0}, "tool_wall_s=0"),
        ({**base, "tool_wall_s": "2"}, "tool_wall_s='2'"),
        ({**base, "tool_wall_s": 1e10}, "tool_wall_s=10000000000.0: .* <= 3600"),  # killed every worker
        ({**base, "tool_wall_s": True}, "tool_wall_s=True"),
        ({**base, "tools": False, "tool_wall_s": 2}, "tool mode only"),
    ):
        with pytest.raises(GF2ConfigError, match=message):
            LLMSpec.from_mapping(bad)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--temperature", "nan"], "temperature=nan is not a finite number"),
        (["--temperature", "inf"], "temperature=inf is not a finite number"),
        (["--top-p", "nan"], "top_p=nan is not a finite number"),
        (["--timeout", "nan"], "timeout=nan: give a request's deadline in seconds, > 0"),
        (["--timeout", "-1"], "timeout=-1.0: give"),
        (["--timeout", "0"], "timeout=0.0: give"),
        (["--base-url", "ftp://127.0.0.1:8000"], "is not an http(s) URL with a host"),
        (["--base-url", "http://[::1"], "base_url='http://[::1' is not a URL"),
        (["--base-url", "http://127.0.0.1:99999"], "is not a URL (Port out of range"),
        (["--base-url", "127.0.0.1:8000"], "is not an http(s) URL with a host"),
        # Past any real value, each was taken and ran for ever or failed every query (the CLI fuzz test):
        (["--temperature", "1e308"], "temperature=1e+308 is outside [0, 100.0]"),
        (["--top-k", str(10**30)], "is not a count of tokens in [1, 10,000,000]"),
        (["--max-tokens", str(10**30)], "is outside [1, 1,000,000,000]"),
        (["--max-model-len", str(10**30)], "is outside [2, 1,000,000,000]"),
        (["--samples", str(10**30)], "is outside [1, 10,000]"),
        (["--concurrency", str(10**30)], "is outside [1, 4,096]"),
        (["--retries", str(10**30)], "is outside [0, 100]"),
        (["--max-response-bytes", str(10**30)], "is outside [1, 1,073,741,824]"),
        (["--tools", "--max-revisions", str(10**30)], "is outside [0, 1,000]"),
    ],
)
def test_eval_flags_are_checked_where_they_are_made(tmp_path, flags, message):
    """Each was accepted (every query then failed, or retried for 16 s) or a traceback."""
    base = ["eval", "--agent", "openai", "--model", "m", "--depths", "0", "--trials", "1"]
    if "--base-url" not in flags:
        base += ["--base-url", "http://127.0.0.1:1"]
    done = run_cli(*base, *flags, "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "out").exists()


def test_a_served_backend_without_the_llm_extra_is_one_line_naming_it(tmp_path):
    """Without httpx, gf2 eval printed a 37-line ModuleNotFoundError and left queries.jsonl.lock."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['httpx'] = None  # not installed\n")
    env = {"PYTHONPATH": f"{blocker}:{REPO}", "PATH": "/usr/bin:/bin"}
    out = tmp_path / "out"
    args = ["eval", "--agent", "openai", "--model", "m", "--base-url", "http://127.0.0.1:1", "--depths", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "gf2env", *args, "--trials", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "pip install -e '.[llm]'" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not out.exists()

"""GF2SetPolicy: shapes, exact per-sample features, invariance over samples, a head that does not grow
with C(p, d-1), save/load, the harness and a short training run from a config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import torch  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402

from gf2env.agents.harness.grid import Grid, grid_cells  # noqa: E402
from gf2env.agents.sb3_agent import SB3Agent, SB3Spec, observations  # noqa: E402
from gf2env.agents.set_policy import (  # noqa: E402
    GF2CandidateHead,
    GF2SetExtractor,
    GF2SetPolicy,
    GF2SetQPolicy,
    resolve_policy,
)
from gf2env.errors import GF2ConfigError  # noqa: E402
from gf2env.integrations.sb3_vec_env import SB3VecEnv  # noqa: E402
from gf2env.records.record import generate_record  # noqa: E402
from gf2env.task.oracle import TaskConfig  # noqa: E402
from gf2env.train.gamma_log import read_gamma_csv  # noqa: E402
from gf2env.train.sb3 import build_model, load_sb3_config  # noqa: E402
from tests.paths import REPO as ROOT

SMALL = dict(p=6, d=3, n=4, K=16)
P12 = dict(p=12, d=4, n=8, K=32)


def make_model(policy, setting: dict, **kwargs) -> PPO:
    env = SB3VecEnv(2, sampling="adversarial", step_mode="reveal", **setting)
    return PPO(policy, env, n_steps=16, batch_size=32, n_epochs=2, device="cpu", seed=0, **kwargs)


def batch(setting: dict, depths=(0, 1, 2, 3), trials: int = 4) -> dict[str, np.ndarray]:
    config = TaskConfig(p=setting["p"], d=setting["d"], n=setting["n"], K=setting["K"])
    records = [generate_record(config, g, t, seed=7) for g in depths for t in range(trials)]
    return observations(records, setting["n"])


def logits_and_values(model: PPO, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        tensor, _ = model.policy.obs_to_tensor(obs)
        logits = model.policy.get_distribution(tensor).distribution.logits
        return logits.numpy(), model.policy.predict_values(tensor).numpy()


@pytest.mark.parametrize("setting", [SMALL, P12])
def test_extractor_shapes(setting):
    model = make_model(GF2SetPolicy, setting, policy_kwargs={"d": setting["d"], "hidden": 32})
    obs = batch(setting)
    tensor, _ = model.policy.obs_to_tensor(obs)
    features = model.policy.extract_features(tensor)
    C = {6: 15, 12: 220}[setting["p"]]
    assert features.shape == (16, C + 2 * 32 + setting["n"] + 1)
    logits, values = logits_and_values(model, obs)
    assert logits.shape == (16, C) and values.shape == (16, 1)


def test_known_term_firings_and_the_residual_are_exact():
    """On a record, the residual label the extractor computes is a_g AND the target's payload bits."""
    model = make_model(GF2SetPolicy, SMALL, policy_kwargs={"d": 3})
    config = TaskConfig(p=6, d=3, n=4, K=16)
    records = [generate_record(config, g, t, seed=3) for g in (0, 1, 2, 3) for t in range(5)]
    tensor, _ = model.policy.obs_to_tensor(observations(records, 4))
    from stable_baselines3.common.preprocessing import preprocess_obs

    extractor = model.policy.features_extractor
    residual, a_g, _ = extractor.sample_features(preprocess_obs(tensor, model.observation_space))
    for i, rec in enumerate(records):
        truth = rec.address[:, rec.g] * rec.payload[:, list(rec.target)].all(-1)
        np.testing.assert_array_equal(residual[i].numpy(), truth)
        np.testing.assert_array_equal(a_g[i].numpy(), rec.address[:, rec.g])
    assert any(rec.address[:, : rec.g].any() for rec in records)  # known terms did fire somewhere


def test_the_candidate_head_is_its_definition_candidate_by_candidate():
    """The head's batched layout (incidence matmuls, channels first) against the formula written per
    candidate: relu(sum of member embeddings + sample terms + c_kS (w1 + a_g w2)), pooled, scored."""
    from gf2env.task.combinatorics import all_supports

    torch.manual_seed(0)
    p, d, H, E = 7, 4, 8, 5
    supports = all_supports(p, d - 1)
    head = GF2CandidateHead(supports, p, H, E)
    B, K = 3, 6
    h = torch.randn(B, K, H)
    payload = torch.randint(0, 2, (B, K, p)).float()
    residual, labels, a_g = (torch.randint(0, 2, (B, K)).float() for _ in range(3))
    got = head(h, payload, residual, labels, a_g)
    bits = head.member(
        head.bit_net(torch.cat([h.unsqueeze(2).expand(B, K, p, H), payload.unsqueeze(-1)], -1))
    )
    per_sample = head.sample(torch.stack([residual, labels, a_g], -1))
    want = torch.empty(B, len(supports))
    for c, support in enumerate(supports):
        fires = payload[:, :, support].prod(-1, keepdim=True)
        firing = head.firing(torch.stack([torch.ones_like(a_g), a_g], -1))
        z = torch.relu(bits[:, :, support].sum(2) + per_sample + fires * firing)  # (B, K, E)
        want[:, c] = head.score(torch.cat([z.mean(1), z.amax(1)], -1)).squeeze(-1)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert int(payload[:, :, supports].prod(-1).sum()) > 0  # some candidate fired somewhere


def shuffled(obs: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """The same observations with their K samples in another order (each row its own permutation)."""
    rng = np.random.default_rng(seed)
    out = {key: value.copy() for key, value in obs.items()}
    for i in range(len(obs["labels"])):
        perm = rng.permutation(obs["labels"].shape[1])
        for key in ("address", "payload", "labels"):
            out[key][i] = obs[key][i][perm]
    return out


@pytest.mark.parametrize("setting", [SMALL, P12])
def test_logits_and_value_are_invariant_to_the_order_of_samples(setting):
    model = make_model(GF2SetPolicy, setting, policy_kwargs={"d": setting["d"]})
    model.learn(64)  # weights moved away from the initialisation
    obs = batch(setting)
    logits, values = logits_and_values(model, obs)
    again, values2 = logits_and_values(model, shuffled(obs, 1))
    np.testing.assert_allclose(again, logits, atol=1e-5)
    np.testing.assert_allclose(values2, values, atol=1e-5)
    assert np.ptp(logits, axis=1).max() > 1e-4  # not trivially constant


def test_the_mlp_baseline_is_not_invariant():
    model = make_model("MultiInputPolicy", SMALL)
    obs = batch(SMALL)
    logits, values = logits_and_values(model, obs)
    again, values2 = logits_and_values(model, shuffled(obs, 1))
    assert np.abs(again - logits).max() > 1e-4 and np.abs(values2 - values).max() > 1e-4


def test_the_action_head_does_not_grow_with_the_number_of_candidates():
    counts = {}
    for setting in (SMALL, P12):
        model = make_model(GF2SetPolicy, setting, policy_kwargs={"d": setting["d"]})
        extractor = model.policy.features_extractor
        assert isinstance(extractor, GF2SetExtractor)
        counts[extractor.num_candidates] = sum(x.numel() for x in extractor.head.parameters())
        # no Linear(latent, C) action net either
        assert sum(x.numel() for x in model.policy.action_net.parameters()) == 0
    assert set(counts) == {15, 220} and len(set(counts.values())) == 1


def test_save_load_round_trip_and_the_harness(tmp_path):
    model = make_model(GF2SetPolicy, SMALL, policy_kwargs={"d": 3, "hidden": 32, "bit_hidden": 16})
    model.learn(64)
    path = tmp_path / "set.zip"
    model.save(str(path))
    loaded = PPO.load(str(path), device="cpu")
    assert isinstance(loaded.policy, GF2SetPolicy)
    obs = batch(SMALL)
    np.testing.assert_array_equal(
        loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0]
    )
    np.testing.assert_allclose(logits_and_values(loaded, obs)[0], logits_and_values(model, obs)[0], atol=1e-6)
    agent = SB3Agent(SB3Spec(str(path), "ppo"))
    cell = next(grid_cells(Grid(depths=(1,), trials=20, p=(6,), d=(3,), K=(16,), seed=5)))
    estimate = agent.answer(cell)
    assert estimate.action.shape == (20,) and np.all((estimate.gamma >= 0) & (estimate.gamma <= 1))


def test_policy_names_resolve_in_one_place(tmp_path):
    assert resolve_policy("GF2SetPolicy", "a2c") is GF2SetPolicy
    assert resolve_policy("MultiInputPolicy", "ppo") == "MultiInputPolicy"
    with pytest.raises(GF2ConfigError, match="GF2SetPolicy"):
        resolve_policy("SetPolicy", "ppo")
    assert resolve_policy("GF2SetPolicy", "dqn") is GF2SetQPolicy
    config = load_sb3_config(ROOT / "configs" / "train/sb3/small-set.yaml", output_dir=str(tmp_path))
    config.hyper["policy_kwargs"]["d"] = 4
    with pytest.raises(GF2ConfigError, match="env's d=3"):
        build_model(config)
    for name in ("small-set.yaml", "p12-set.yaml"):
        config = load_sb3_config(ROOT / "configs" / "train" / "sb3" / name, output_dir=str(tmp_path))
        assert isinstance(build_model(config).policy, GF2SetPolicy)


CONFIG = """\
env: {{p: 6, d: 3, n: 4, K: 8, sampling: adversarial, step_mode: reveal}}
num_envs: 4
algo: ppo
ppo: {{policy: GF2SetPolicy, n_steps: 32, batch_size: 64, n_epochs: 2, gamma: 0.0,
      policy_kwargs: {{hidden: 32, bit_hidden: 16, net_arch: [32]}}}}
a2c: {{policy: GF2SetPolicy, n_steps: 8, gamma: 0.0}}
dqn: {{policy: GF2SetPolicy, learning_starts: 64, buffer_size: 2000, batch_size: 32, gamma: 0.0,
      policy_kwargs: {{hidden: 32, bit_hidden: 16}}}}
total_timesteps: 512
gamma: {{depths: [0, 1], trials: 20, every: 256, eval_seed: 99}}
checkpoint_every: 256
seed: 0
output_dir: {out}
"""


@pytest.mark.parametrize("algo, history", [("ppo", None), ("a2c", None), ("dqn", None), ("ppo", "learned")])
def test_a_short_training_run_from_a_config(tmp_path, algo, history):
    config = tmp_path / "set.yaml"
    config.write_text(CONFIG.format(out=tmp_path / "out"))
    cmd = [sys.executable, "-m", "gf2env.train.sb3", "--config", str(config), "--algo", algo,
           "--total-timesteps", "1024"]  # fmt: skip
    if history:
        cmd += ["--policy-kwargs", f"{{history: {history}}}"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    out: Path = tmp_path / "out"
    rows = read_gamma_csv(out / "gamma.csv")
    assert max(r["step"] for r in rows) >= 1024 and {r["g"] for r in rows} == {0, 1}
    agent = SB3Agent(SB3Spec(str(out / "final.zip"), algo))
    assert isinstance(agent.model.policy, GF2SetQPolicy if algo == "dqn" else GF2SetPolicy)
    assert agent.model.policy.history == (history or "exact")
    cell = next(grid_cells(Grid(depths=(1,), trials=10, p=(6,), d=(3,), K=(8,), seed=5)))
    gamma = agent.answer(cell).gamma
    assert gamma.shape == (10,) and np.all((gamma >= 0) & (gamma <= 1))


def test_the_q_policy_scores_candidates_with_the_set_head(tmp_path):
    from stable_baselines3 import DQN

    env = SB3VecEnv(2, sampling="adversarial", step_mode="reveal", **SMALL)
    model = DQN(GF2SetQPolicy, env, learning_starts=32, batch_size=16, buffer_size=500, device="cpu", seed=0,
                policy_kwargs={"d": 3, "hidden": 32, "bit_hidden": 16})  # fmt: skip
    model.learn(128)
    q_net = model.policy.q_net
    assert isinstance(q_net.features_extractor, GF2SetExtractor) and not list(q_net.q_net.parameters())
    obs = batch(SMALL)
    tensor, _ = model.policy.obs_to_tensor(obs)
    with torch.no_grad():
        values = q_net(tensor)
        again = q_net(model.policy.obs_to_tensor(shuffled(obs, 2))[0])
    assert values.shape == (16, 15)
    torch.testing.assert_close(again, values, atol=1e-5, rtol=1e-5)
    model.save(str(tmp_path / "dqn.zip"))
    loaded = DQN.load(str(tmp_path / "dqn.zip"), device="cpu")
    assert isinstance(loaded.policy, GF2SetQPolicy)
    with torch.no_grad():
        torch.testing.assert_close(loaded.policy.q_net(tensor), values)
    with pytest.raises(GF2ConfigError, match="env has 15 actions"):
        DQN(GF2SetQPolicy, env, device="cpu", policy_kwargs={"d": 4})
    with pytest.raises(GF2ConfigError, match="drop net_arch"):
        DQN(GF2SetQPolicy, env, device="cpu", policy_kwargs={"d": 3, "net_arch": [64]})


def test_policy_kwargs_from_the_command_line_merge_into_the_configs(tmp_path):
    path = ROOT / "configs" / "train/sb3/small-set.yaml"
    config = load_sb3_config(path, "{history: none, hidden: 16}", output_dir=str(tmp_path))
    assert config.hyper["policy_kwargs"] == {
        "hidden": 16,
        "bit_hidden": 32,
        "net_arch": [64],
        "history": "none",
    }
    for text, match in (("[none]", "not a mapping"), ("{history: [", "not valid YAML")):
        with pytest.raises(GF2ConfigError, match=match):
            load_sb3_config(path, text)
    config = load_sb3_config(path, "{history: true}", output_dir=str(tmp_path))
    with pytest.raises(GF2ConfigError, match="history=True is not one of"):
        build_model(config)


def test_the_policy_learns_to_use_the_history(tmp_path):
    """With the prefix encoded per known term and nothing computed for it, PPO learns the residual:
    at g=3 it is far above what the samples alone give (estimator B: about 0.32)."""
    config = load_sb3_config(
        ROOT / "configs" / "train/sb3/small-set.yaml", "{history: learned}", output_dir=str(tmp_path)
    )
    model = build_model(config)  # the preset's PPO, as `gf2 train sb3 --policy-kwargs` builds it
    model.learn(40_000)
    agent = SB3Agent(SB3Spec("<live>", "ppo"), model=model)
    cell = next(grid_cells(Grid(depths=(3,), trials=300, p=(6,), d=(3,), K=(16,), seed=11)))
    assert agent.answer(cell).gamma.mean() > 0.7


def test_the_history_ablation_does_not_see_the_prefix():
    obs = batch(SMALL, depths=(2,))
    other = {**obs, "prefix": np.zeros_like(obs["prefix"])}  # the known terms forgotten
    for history in ("exact", "learned", "none"):
        model = make_model(GF2SetPolicy, SMALL, policy_kwargs={"d": 3, "history": history})
        changed = np.abs(logits_and_values(model, other)[0] - logits_and_values(model, obs)[0]).max()
        assert (changed > 1e-6) == (history != "none")

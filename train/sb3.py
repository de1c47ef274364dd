"""stable-baselines3 on the native vector env, γ_g measured at every depth while it trains.

    python -m gf2env.train.sb3 --config configs/train/sb3/small.yaml [--algo ppo|dqn|a2c] [--output-dir DIR]
                        [--total-timesteps N] [--policy-kwargs '{history: learned}'] [--resume]
                        [--no-progress]
    gf2 train sb3 --config ...            (the same)

The config is zoo-style: ``env`` (GF2Recon-v1 arguments), ``num_envs``, ``algo`` and one mapping of
hyper-parameters per algorithm (``ppo:``, ``dqn:``, ``a2c:``, passed to its constructor), plus
``total_timesteps``, ``gamma`` (the held-out evaluation: depths, records a depth, every how many
timesteps, ``eval_seed``), ``checkpoint_every`` (timesteps), ``seed``, ``output_dir`` and ``progress``
(``false``: no progress bar, as ``--no-progress``).

Top to bottom: the vector env (:class:`gf2env.integrations.sb3_vec_env.SB3VecEnv`, sub-env ``i``
seeded ``seed + i``, in SB3's ``VecMonitor`` for ``rollout/ep_rew_mean`` and ``rollout/ep_len_mean``) →
the algorithm with ``MultiInputPolicy`` or a policy named in :data:`gf2env.agents.set_policy.SB3_POLICIES`
(``policy: GF2SetPolicy``, its ``d`` from the env) (TensorBoard logs in ``output_dir/tensorboard``), or,
with ``--resume``, the last checkpoint of ``output_dir/checkpoints`` →
callbacks (γ_g on the harness's held-out grid through :class:`gf2env.agents.sb3_agent.SB3Agent`, written
by :class:`gf2env.train.gamma_log.GammaLog`, printed and logged as ``gamma/g{g}``, ``gamma/g{g}_lo``,
``gamma/g{g}_hi``; checkpoints) → ``learn`` up to ``total_timesteps`` in all → ``output_dir/final.zip``,
which ``gf2 compare`` loads as an agent (``- sb3: {path: .../final.zip, algo: ppo}``); ``output_dir/run.json``
records the run (:func:`gf2env.run_record.run_record`).

Resuming: checkpoints are saved between rollouts (after the update) at the first rollout past each
multiple of ``checkpoint_every``, so a resumed run collects the rollouts an uninterrupted run would and
ends at the same timestep; γ_g is evaluated at step 0, at the first timestep past each multiple of
``gamma.every`` and at the end, skipping steps already in ``gamma.csv``.

Every action of GF2Recon is legal (any candidate may be proposed; a wrong one is a wrong step), so
there is no action mask to learn with and sb3-contrib's MaskablePPO would add nothing here.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gf2env.agents.sb3_agent import SB3_ALGOS
from gf2env.config.flags import add_flags
from gf2env.config.options import option
from gf2env.config.settings import TaskSettings
from gf2env.config.yaml_files import check_bools, dataclass_from_mapping, read_config
from gf2env.errors import GF2ConfigError
from gf2env.run_record import run_record
from gf2env.train.config import output_folder
from gf2env.train.gamma_log import GammaEvalSpec, GammaLog, gamma_line, gamma_scalars

_EXTRA_KEYS = (*SB3_ALGOS, "description")  # hyper-parameters under the algorithm's name; a note
# The γ evaluation of an SB3 run: GammaEvalSpec's keys that are not an LLM's sampling, and its defaults.
_GAMMA_KEYS = ("depths", "trials", "every", "eval_seed", "level")
_GAMMA_DEFAULTS: dict[str, Any] = {"trials": 200, "every": 10_000}


@dataclass
class SB3Config:
    """A training run (see the module docs)."""

    # Each field's YAML key and its flag of `gf2 train sb3` (gf2env.config.options).
    env: dict[str, Any] = field(metadata=option(flag=False))
    algo: str = field(default="ppo", metadata=option(choices=SB3_ALGOS, help="override the config's algo"))
    hyper: dict[str, Any] = field(default_factory=dict, metadata=option(flag=False))  # the key is algo's name
    num_envs: int = 8
    total_timesteps: int = field(default=100_000, metadata=option(help="override total_timesteps"))
    gamma: GammaEvalSpec = field(
        default_factory=lambda: GammaEvalSpec(**_GAMMA_DEFAULTS), metadata=option(flag=False)
    )
    checkpoint_every: int = 50_000
    seed: int = 0
    output_dir: Path = field(default=Path("results/sb3"), metadata=option(help="override output_dir"))
    progress: bool = field(default=True, metadata=option(negate=True, help="no progress bar while learning"))

    def __post_init__(self) -> None:
        if self.algo not in SB3_ALGOS:
            raise GF2ConfigError(f"algo={self.algo!r} is not one of {SB3_ALGOS}.")
        for name in ("num_envs", "total_timesteps", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise GF2ConfigError(f"{name}={getattr(self, name)} is less than the minimum 1.")
        n = int(self.env.get("n", 32))
        if max(self.gamma.depths) >= n:
            raise GF2ConfigError(
                f"gamma.depths {list(self.gamma.depths)} reach g={max(self.gamma.depths)}, but the env "
                f"has n={n} terms; evaluate at depths below n."
            )
        if self.seed == self.gamma.eval_seed:
            raise GF2ConfigError(f"seed={self.seed} equals gamma.eval_seed; give the held-out set another.")

    @property
    def task(self) -> TaskSettings:
        """The task of the env (its ``GF2Recon-v1`` arguments other than ``n`` and the step mode)."""
        keys = ("p", "d", "K", "sampling", "w")
        return TaskSettings(**{k: self.env[k] for k in keys if k in self.env})


def load_sb3_config(path: str | Path, policy_kwargs: str | None = None, **overrides: Any) -> SB3Config:
    """Read a run from YAML (unknown keys are errors); ``overrides`` (algo, output_dir, ...) win, and
    ``policy_kwargs`` (a YAML mapping, e.g. ``"{history: none}"``) is merged into the algorithm's."""
    path = Path(path)
    obj = read_config(path, "SB3 run (configs/train/sb3/)", SB3Config, extra=_EXTRA_KEYS, skip=("hyper",))
    check_bools(SB3Config, obj, str(path))
    if "env" not in obj:  # an empty file (or another YAML file) would otherwise be a default run
        raise GF2ConfigError(
            f"{path} names no env: (the GF2Recon-v1 arguments, e.g. env: {{p: 6, d: 3, n: 4, K: 16}}; "
            "env: {} for the defaults); see configs/train/sb3/small.yaml."
        )
    gamma = dataclass_from_mapping(
        GammaEvalSpec, obj.get("gamma"), f"{path}: gamma", convert={"depths": tuple},
        defaults=_GAMMA_DEFAULTS, keys=_GAMMA_KEYS,
    )  # fmt: skip
    algo = overrides.get("algo") or obj.get("algo", "ppo")
    if algo not in SB3_ALGOS:
        raise GF2ConfigError(f"algo={algo!r} is not one of {SB3_ALGOS}.")
    values: dict[str, Any] = {
        "env": dict(obj.get("env") or {}),
        "algo": algo,
        "hyper": dict(obj.get(algo) or {}),
        "num_envs": int(obj.get("num_envs", 8)),
        "total_timesteps": int(obj.get("total_timesteps", 100_000)),
        "gamma": gamma,
        "checkpoint_every": int(obj.get("checkpoint_every", 50_000)),
        "seed": int(obj.get("seed", 0)),
        "output_dir": output_folder(obj.get("output_dir", f"results/sb3-{algo}"), f"{path}: output_dir"),
        "progress": obj.get("progress", True),
    }
    values.update({k: v for k, v in overrides.items() if v is not None and k != "algo"})
    values["output_dir"] = output_folder(values["output_dir"], "--output-dir")
    if policy_kwargs is not None:
        values["hyper"]["policy_kwargs"] = {**(values["hyper"].get("policy_kwargs") or {}),
                                            **parse_policy_kwargs(policy_kwargs)}  # fmt: skip
    return SB3Config(**values)


def parse_policy_kwargs(text: str) -> dict[str, Any]:
    """``--policy-kwargs``: a YAML mapping of the policy's keyword arguments."""
    import yaml

    from gf2env.config.yaml_files import load_yaml

    try:
        obj = load_yaml(text)
    except yaml.YAMLError as err:
        raise GF2ConfigError(f"--policy-kwargs {text!r} is not valid YAML: {err}") from None
    if not isinstance(obj, dict):
        raise GF2ConfigError(f"--policy-kwargs {text!r} is not a mapping; write it as '{{history: none}}'.")
    return obj


def next_multiple(step: int, every: int) -> int:
    """The first multiple of ``every`` after ``step``: when a callback next acts."""
    return (step // every + 1) * every


def make_gamma_callback(config: SB3Config, resume: bool = False) -> Any:
    """An SB3 callback that evaluates γ_g at step 0, at the first timestep past each multiple of
    ``gamma.every`` and at the end (not at steps already in ``gamma.csv``), prints it and logs it."""
    from stable_baselines3.common.callbacks import BaseCallback

    from gf2env.agents.harness.evaluate import evaluate
    from gf2env.agents.harness.grid import grid_cells
    from gf2env.agents.sb3_agent import SB3Agent, SB3Spec
    from gf2env.report.results import summarize

    spec = config.gamma
    grid = spec.grid(config.task)
    log = GammaLog(config.output_dir, resume=resume)

    class GammaCallback(BaseCallback):
        def evaluate_now(self) -> None:
            step = int(self.num_timesteps)
            if step in log.done_steps:
                return
            agent = SB3Agent(SB3Spec(path="<live>", algo=config.algo, name=f"step {step}"), model=self.model)
            rows = evaluate([agent], grid_cells(grid), progress=False).rows
            summary = summarize(rows, level=spec.level)
            head = {"active_depths": "", "eval_seed": spec.eval_seed, "prompt_id": ""}
            log.record(step, summary, head)
            for key, value in gamma_scalars(summary).items():  # SB3's logger: TensorBoard (stdout if verbose)
                self.logger.record(key, value)
            self.logger.dump(step)
            print(gamma_line(step, summary), flush=True)

        def _on_training_start(self) -> None:
            if self.num_timesteps == 0:  # a resumed run continues the clock: no evaluation at its start
                self.evaluate_now()
            self.next = next_multiple(self.num_timesteps, spec.every)

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next:
                self.evaluate_now()
                self.next = next_multiple(self.num_timesteps, spec.every)
            return True

        def _on_training_end(self) -> None:
            self.evaluate_now()
            log.plot()

    return GammaCallback()


def checkpoint_paths(config: SB3Config, step: int) -> tuple[Path, Path]:
    """The checkpoint at timestep ``step`` and its replay buffer (SB3's ``CheckpointCallback`` names)."""
    folder = config.output_dir / "checkpoints"
    model = folder / f"{config.algo}_{step}_steps.zip"
    return model, folder / f"{config.algo}_replay_buffer_{step}_steps.pkl"


def make_checkpoint_callback(config: SB3Config) -> Any:
    """An SB3 callback that saves a checkpoint (an off-policy algorithm's replay buffer first) at the start
    of the first rollout past each multiple of ``checkpoint_every``: after the update, so that a resumed
    run continues on an uninterrupted run's rollouts. Unlike SB3's ``CheckpointCallback`` (same names),
    each file is written under a temporary name and renamed: a run killed while saving leaves none half
    written."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

    def save(write: Any, path: Path) -> None:
        part = path.with_name(f"{path.name}.part")
        with open(part, "wb") as fh:
            write(fh)
        part.replace(path)

    class RolloutCheckpoint(BaseCallback):
        def _on_training_start(self) -> None:
            (config.output_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
            self.next = next_multiple(self.num_timesteps, config.checkpoint_every)

        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            if self.num_timesteps < self.next:
                return
            model, buffer = checkpoint_paths(config, self.num_timesteps)
            if isinstance(self.model, OffPolicyAlgorithm):
                save(self.model.save_replay_buffer, buffer)
            save(self.model.save, model)
            self.next = next_multiple(self.num_timesteps, config.checkpoint_every)

    return RolloutCheckpoint()


def make_env(config: SB3Config) -> Any:
    """The native vector env in SB3's ``VecMonitor`` (episode returns and lengths in the logs)."""
    from stable_baselines3.common.vec_env import VecMonitor

    from gf2env.integrations.sb3_vec_env import SB3VecEnv

    return VecMonitor(SB3VecEnv(config.num_envs, **config.env))


def build_model(config: SB3Config) -> Any:
    """The SB3 algorithm on the native vector env (seeded ``seed``: sub-env ``i`` ``seed + i``)."""
    import stable_baselines3 as sb3

    from gf2env.agents.set_policy import resolve_policy

    hyper = {"policy": "MultiInputPolicy", "device": "cpu", **config.hyper}
    policy = resolve_policy(hyper.pop("policy"), config.algo)
    if not isinstance(policy, str):  # one of ours (an SB3 alias stays a string): d from the env
        kwargs = dict(hyper.get("policy_kwargs") or {})
        if kwargs.setdefault("d", config.task.d) != config.task.d:
            raise GF2ConfigError(f"policy_kwargs d={kwargs['d']} is not the env's d={config.task.d}; drop d.")
        hyper["policy_kwargs"] = kwargs
    algo = getattr(sb3, config.algo.upper())
    logs = str(config.output_dir / "tensorboard")
    try:
        return algo(policy, make_env(config), seed=config.seed, tensorboard_log=logs, **hyper)
    except TypeError as err:
        raise GF2ConfigError(f"{config.algo}: {err}; the keys are {algo.__name__}'s arguments.") from None
    except (ValueError, RuntimeError) as err:  # a value the algorithm or its network cannot take
        raise GF2ConfigError(
            f"{config.algo}: {algo.__name__} refused the config's {config.algo}: section (with "
            f"--policy-kwargs merged into its policy_kwargs): {err}"
        ) from None


def last_checkpoint(config: SB3Config) -> tuple[Path, int]:
    """The checkpoint ``--resume`` continues from: ``{algo}_{N}_steps.zip`` of ``output_dir/checkpoints``
    with the largest ``N``, and ``N``."""
    folder = config.output_dir / "checkpoints"
    pattern = re.compile(rf"{config.algo}_(\d+)_steps\.zip")
    found = {int(m[1]): path for path in folder.glob("*.zip") if (m := pattern.fullmatch(path.name))}
    if not found:
        raise GF2ConfigError(
            f"--resume: {folder} holds no {config.algo}_<N>_steps.zip checkpoint; pass the --output-dir "
            f"(and --algo) of the run to resume, or run without --resume to start it."
        )
    return found[max(found)], max(found)


def load_checkpoint(config: SB3Config) -> Any:
    """The last checkpoint (with its replay buffer where one was saved) on a fresh env, seeded
    ``seed + N`` so that the resumed run does not replay the records its start drew."""
    import stable_baselines3 as sb3

    path, step = last_checkpoint(config)
    algo = getattr(sb3, config.algo.upper())
    logs = str(config.output_dir / "tensorboard")
    try:
        model = algo.load(path, env=make_env(config), device="cpu", tensorboard_log=logs)
    except ValueError as err:  # SB3's check of the spaces: the config's env is not the checkpoint's
        raise GF2ConfigError(f"--resume: {path} does not fit the config's env ({err}); resume with "
                             "the config the run was started with.") from None  # fmt: skip
    buffer = checkpoint_paths(config, step)[1]
    kept = ""
    if buffer.exists():
        model.load_replay_buffer(buffer)
        kept = f" and its replay buffer ({model.replay_buffer.size()} steps of {model.n_envs} envs)"
    model.set_random_seed(config.seed + step)
    print(f"resuming from {path}{kept} at timestep {model.num_timesteps}", flush=True)
    return model


def main(argv: Sequence[str] | None = None) -> int:
    from stable_baselines3.common.callbacks import CallbackList

    parser = argparse.ArgumentParser(prog="gf2 train sb3", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="a YAML run, e.g. configs/train/sb3/small.yaml")
    add_flags(parser, SB3Config, ["algo", "output_dir", "total_timesteps", "progress"], overrides=True)
    parser.add_argument(
        "--policy-kwargs",
        metavar="YAML",
        help="a mapping merged into the algorithm's policy_kwargs: '{history: none}'",
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from the last checkpoint in OUTPUT_DIR/checkpoints"
    )
    args = parser.parse_args(argv)
    config = load_sb3_config(
        args.config, args.policy_kwargs, algo=args.algo, output_dir=args.output_dir,
        total_timesteps=args.total_timesteps, progress=args.progress,
    )  # fmt: skip
    model = load_checkpoint(config) if args.resume else build_model(config)
    seeds = {"seed": config.seed, "eval_seed": config.gamma.eval_seed}  # a resumed run's env: seed + N
    with run_record(config.output_dir, "train sb3", config, seeds=seeds):  # output_dir/run.json
        callbacks = CallbackList([make_gamma_callback(config, args.resume), make_checkpoint_callback(config)])
        model.learn(  # total_timesteps counts the whole run: a resumed one learns what is left
            max(config.total_timesteps - model.num_timesteps, 0), callback=callbacks,
            reset_num_timesteps=not args.resume, progress_bar=config.progress,
        )  # fmt: skip
        model.save(str(config.output_dir / "final.zip"))
    print(f"wrote {config.output_dir / 'final.zip'}, {config.output_dir / 'gamma.csv'} and the γ_g plots")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

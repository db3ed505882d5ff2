"""``themis models``: list, prepare (resolve the weights of) or register the registry's models."""

from __future__ import annotations

import argparse

from themis_dagster.cli.common import ensure_dagster_home
from themis_dagster.registry.models import get_model, load_registry
from themis_dagster.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = subparsers.add_parser("models", help="list, prepare or register the models of the registry")
    models.add_argument("action", choices=["list", "prepare", "register"])
    models.add_argument("ids", nargs="*")
    models.set_defaults(func=cmd_models)


def cmd_models(args: argparse.Namespace) -> int:
    from themis_dagster.registry.weights import resolve_weights

    settings = Settings.from_env()
    models = load_registry(settings.models_file, settings.discovered_models_file)
    if args.action == "list":
        for spec in models.values():
            print(f"{spec.id}\t{spec.source.kind}\t{spec.description}")
    elif args.action == "prepare":
        for model_id in args.ids or list(models):
            weights = resolve_weights(get_model(models, model_id), settings.models_dir, settings.cache_dir)
            print(f"{model_id}\t{weights.path}\t{weights.weights_sha256}")
    elif args.action == "register":
        from dagster import DagsterInstance

        from themis_dagster.partitions import register_models

        ensure_dagster_home()
        ids = args.ids or list(models)
        for model_id in ids:
            get_model(models, model_id)
        new = register_models(DagsterInstance.get(), ids)
        print(f"registered {len(new)} new model partition(s): {', '.join(new) or '-'}")
    return 0

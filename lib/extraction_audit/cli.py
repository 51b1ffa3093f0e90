"""The ``extraction-audit`` console script: one subcommand per stage.

Errors that a user can fix (bad config, missing model, mismatched tokenizer, bad input)
are raised as ``UserFacingError`` / ``ConfigError`` and printed as one clear line with
exit status 2, never as a deep Spark stack trace.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys

from . import commands
from .config import ConfigError
from .errors import UserFacingError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="extraction-audit",
        description="Measure how much training text a language model reproduces verbatim.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", default=None,
                        help="YAML config (default: the built-in conf/local.yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set generation.budget_tokens=5000 (YAML value)")


def load_cli_config(args):
    import yaml

    from .config import load_config

    overrides = {}
    for item in getattr(args, "set", []) or []:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        overrides[key.strip()] = yaml.safe_load(value)
    return load_config(args.config, overrides)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("py4j", "urllib3", "filelock", "matplotlib", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        result = args.func(args)
    except (ConfigError, UserFacingError) as err:
        print(f"extraction-audit {args.command}: error: {err}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())

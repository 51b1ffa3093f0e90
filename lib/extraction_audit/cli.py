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


class OneLineArgumentParser(argparse.ArgumentParser):
    """Usage mistakes are one line and exit 2, like every other user error."""

    def error(self, message: str):  # noqa: D102 - argparse hook
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


ID_ARGUMENTS = {"run_id": "--run-id", "control_run_id": "--control-run-id", "compare": "--compare"}


def validate_id_arguments(args) -> None:
    """Run ids from the command line are checked before any config, session or table."""
    from .ids import validate_id

    for attr, flag in ID_ARGUMENTS.items():
        value = getattr(args, attr, None)
        for item in (value if isinstance(value, list) else [value]):
            if item is not None:
                validate_id(item, f"{flag}:")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="extraction-audit",
        description="Measure how much training text a language model reproduces verbatim.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=OneLineArgumentParser)
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


def run_stage(args, step: str, **options) -> dict:
    """Load the config, start (or reuse) the session and run one step through the runner."""
    from .runner import Runner
    from .spark import get_spark

    cfg = load_cli_config(args)
    return Runner(get_spark(cfg), cfg).run_step(args.run_id, step, options)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("py4j", "urllib3", "filelock", "matplotlib", "PIL", "SQLQueryContextLogger"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        validate_id_arguments(args)
        result = args.func(args)
    except (ConfigError, UserFacingError) as err:
        print(f"extraction-audit {args.command}: error: {err}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())

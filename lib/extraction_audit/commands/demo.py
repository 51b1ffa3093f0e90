"""``extraction-audit demo``: the whole product on a laptop in a few minutes, no arguments needed."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("demo", help="build a tiny model on a synthetic corpus and audit it end to end")
    p.add_argument("--config", "-c", default=None, help="base config (default: built-in conf/local.yaml)")
    p.add_argument("--demo-dir", default="./ea-data/demo", help="where the synthetic corpus and models are cached")
    p.add_argument("--budget-tokens", type=int, default=20_000, help="generation budget per run")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..config import load_config
    from ..demo import run_demo

    run_demo(demo_dir=args.demo_dir, budget_tokens=args.budget_tokens, base=load_config(args.config))
    return 0

"""``extraction-audit generate``: sample a model up to a token budget into ``samples``.

Creates the run when absent; rerunning the same ``--run-id`` after a crash generates only
the missing samples, and a larger ``--budget-tokens`` extends the run.
"""

from __future__ import annotations


def register(subparsers) -> None:
    from .. import cli

    p = subparsers.add_parser("generate", help="generate samples from the model up to a token budget",
                              description=__doc__)
    cli.add_config_argument(p)
    p.add_argument("--run-id", default=None, help="run to create or continue (default: a new run id)")
    p.add_argument("--budget-tokens", type=int, default=None,
                   help="generated-token budget (default: generation.budget_tokens)")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import cli
    from ..runs import new_run_id
    from ..tokenizer import check_model_location

    cfg = cli.load_cli_config(args)
    check_model_location(cfg.resolve(cfg.model.path), "model.path")  # before a minute of Spark start-up
    args.run_id = run_id = args.run_id or new_run_id()
    stats = cli.run_stage(args, "generate", budget_tokens=args.budget_tokens)
    rate = stats.get("tokens_per_second")
    print(f"run {run_id}: {stats['samples']:,} samples, {stats['generated_tokens']:,} generated tokens "
          f"(budget {stats['budget_tokens']:,}); this call added {stats['samples_added']:,} samples / "
          f"{stats['tokens_added']:,} tokens in {stats['chunks']} chunks, {stats['seconds']:.1f} s"
          + (f", {rate:,.0f} tokens/s" if rate else ""))
    return 0

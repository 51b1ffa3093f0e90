"""``extraction-audit import-samples``: add samples generated elsewhere to a run.

JSONL or Parquet records with ``text`` or ``token_ids`` (plus optional ``prompt`` and
``id``); text is tokenized with the target tokenizer.  Skipped records are counted by
reason.
"""

from __future__ import annotations


def register(subparsers) -> None:
    from .. import cli

    p = subparsers.add_parser("import-samples", help="import external samples (JSONL/Parquet) into a run",
                              description=__doc__)
    cli.add_config_argument(p)
    p.add_argument("--run-id", required=True, help="run to import into (created when absent)")
    p.add_argument("--input", required=True, help="JSONL or Parquet file or folder")
    p.add_argument("--format", choices=["jsonl", "parquet"], default=None,
                   help="input format (default: from the file extension)")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import cli

    print_imported(args.run_id, cli.run_stage(args, "import_samples", input=args.input, format=args.format))
    return 0


def print_imported(run_id: str, stats: dict) -> None:
    skipped = ", ".join(f"{k}: {v:,}" for k, v in stats["skipped"].items()) or "none"
    print(f"run {run_id}: imported {stats['samples_imported']:,} of {stats['records_read']:,} records "
          f"(skipped {skipped}); the run now holds {stats['run_samples']:,} samples, "
          f"{stats['run_tokens']:,} tokens")

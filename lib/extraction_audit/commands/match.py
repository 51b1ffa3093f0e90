"""``extraction-audit match``: verbatim matching of a run's samples against the corpus index."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("match", help="match a run's samples against the corpus index")
    add_config_argument(p)
    p.add_argument("--run-id", required=True)
    p.add_argument("--input", default=None,
                   help="samples generated elsewhere (JSONL or Parquet, as import-samples takes): imported "
                        "into the run, then matched, in one process")
    p.add_argument("--format", choices=["jsonl", "parquet"], default=None,
                   help="--input format (default: from the file extension)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import load_cli_config, run_stage
    from ..runner import Runner
    from ..spark import get_spark
    from .import_samples import print_imported

    if args.input is None:
        print(json.dumps(run_stage(args, "match"), indent=2, default=str))
        return 0
    # One session for both steps: a second process would pay its own interpreter, JVM and
    # first Delta reads again (about 20 s of the 90 s that import-samples + match took for
    # 128 k sample tokens as two commands).
    cfg = load_cli_config(args)
    results = Runner(get_spark(cfg), cfg).run_steps(args.run_id, ["import_samples", "match"],
                                                     {"input": args.input, "format": args.format})
    if "import_samples" in results:
        print_imported(args.run_id, results["import_samples"])
    print(json.dumps(results.get("match", {}), indent=2, default=str))
    return 0

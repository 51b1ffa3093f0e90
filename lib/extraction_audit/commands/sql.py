"""``extraction-audit sql "SELECT ..."``: an analyst's query over the findings tables.

Every table (and ``pii_findings_redacted``) is registered under its plain name first
(``Tables.register_views``), so the query reads as it would in a Databricks SQL editor.
The query text is the user's own SQL, run as given; the options are checked data: the
row limit is an integer and ``--out`` a file path whose folder must exist.  At most
``--limit`` rows reach the driver.
"""

from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("sql", help="run a SQL query over the findings tables (views named like the tables) and "
                                   "print the result as a table or CSV")
    add_config_argument(p)
    p.add_argument("query", help="the SQL text, e.g. \"SELECT * FROM run_metrics ORDER BY run_id, budget_tokens\"")
    p.add_argument("--csv", action="store_true", help="print CSV instead of an aligned table")
    p.add_argument("--out", default=None, help="write CSV to this file instead of printing")
    p.add_argument("--limit", type=int, default=1000, help="most rows returned (default 1000)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import load_cli_config
    from ..errors import UserFacingError
    from ..spark import get_spark
    from ..tables import Tables

    if args.limit < 1:
        raise UserFacingError(f"--limit must be a positive number of rows, got {args.limit}")
    out = Path(args.out) if args.out else None
    if out is not None and not out.parent.is_dir():
        raise UserFacingError(f"--out: folder {out.parent} does not exist")
    cfg = load_cli_config(args)
    warehouse = cfg.resolve(cfg.storage.warehouse)
    if not cfg.storage.database and "://" not in str(warehouse) and not Path(str(warehouse)).is_dir():
        # Checked before the session starts: a local session would create the folder.
        raise UserFacingError(f"no warehouse at {warehouse} (set storage.warehouse, e.g. "
                              "--set storage.warehouse=./ea-data/warehouse, or run the demo first)")
    tables = Tables(get_spark(cfg), cfg)
    tables.register_views()
    frame = run_sql(tables.spark, args.query, args.limit)
    if out is not None:
        frame.to_csv(out, index=False)
        print(f"{len(frame)} rows written to {out}")
    elif args.csv:
        frame.to_csv(sys.stdout, index=False)
    else:
        import pandas as pd

        with pd.option_context("display.max_rows", args.limit, "display.max_columns", None, "display.width", 200,
                               "display.max_colwidth", 80):
            print(frame.to_string(index=False) if len(frame) else "(no rows)")
    return 0


def run_sql(spark, query: str, limit: int):
    """The query's first ``limit`` rows as pandas; a SQL error is one line, not a stack trace."""
    from ..errors import UserFacingError

    try:
        return spark.sql(query).limit(limit).toPandas()
    except Exception as err:  # AnalysisException / ParseException arrive through py4j
        name = type(err).__name__
        if "Exception" in name and ("Analysis" in name or "Parse" in name or "SQL" in str(err)[:200]):
            raise UserFacingError(f"{name}: {str(err).splitlines()[0]}") from None
        raise

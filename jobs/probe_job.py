"""spark-submit / Databricks Python task entry point for `extraction-audit probe`.

Same code path as the CLI; inside spark-submit or Databricks the existing Spark session
and cluster settings are reused (`extraction_audit.spark.get_spark`).
Usage: spark-submit jobs/match_job.py --config conf/cluster-yarn.yaml [options of the subcommand]
"""

import sys

from extraction_audit.cli import main

if __name__ == "__main__":
    sys.exit(main(["probe", *sys.argv[1:]]))

"""spark-submit / Databricks Python task entry point for `extraction-audit generate`.

Same code path as the CLI; inside spark-submit or Databricks the existing Spark session
and cluster settings are reused (`extraction_audit.spark.get_spark`).
Usage: spark-submit jobs/generate_job.py --config conf/cluster-yarn.yaml [options of the subcommand]
"""

import sys

from extraction_audit.cli import main

if __name__ == "__main__":
    sys.exit(main(["generate", *sys.argv[1:]]))

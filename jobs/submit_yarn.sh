#!/usr/bin/env bash
# Nightly audit on Hadoop/YARN with GPU executors for generation.
# Prerequisites: env.tar.gz made with `venv-pack` from a venv where `pip install extraction-audit`
# ran; model.tar.gz / reference-model.tar.gz hold the model folders; the PII HMAC key in the
# environment of the submitting user (forwarded to the driver and executors below).
set -euo pipefail
RUN_ID="${RUN_ID:-audit-$(date -u +%Y%m%d)}"   # same id on a retry: the audit resumes
spark-submit \
  --master yarn --deploy-mode cluster \
  --archives env.tar.gz#environment,model.tar.gz#model,reference-model.tar.gz#reference-model \
  --files conf/cluster-yarn.yaml \
  --conf spark.yarn.appMasterEnv.PYSPARK_PYTHON=./environment/bin/python \
  --conf spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python \
  --conf spark.yarn.appMasterEnv.EXTRACTION_AUDIT_PII_KEY="${EXTRACTION_AUDIT_PII_KEY}" \
  --conf spark.executorEnv.EXTRACTION_AUDIT_PII_KEY="${EXTRACTION_AUDIT_PII_KEY}" \
  --packages io.delta:delta-spark_4.2_2.13:4.4.0 \
  --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
  --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
  --conf spark.executor.resource.gpu.amount=1 \
  --conf spark.executor.resource.gpu.discoveryScript=/opt/spark/examples/src/main/scripts/getGpusResources.sh \
  --conf spark.task.resource.gpu.amount=0.25 \
  --conf spark.executor.cores=4 \
  --conf spark.executor.memory=24g \
  --conf spark.sql.shuffle.partitions=2000 \
  --conf spark.sql.adaptive.enabled=true \
  jobs/audit_job.py --config cluster-yarn.yaml --run-id "${RUN_ID}" --set generation.task_gpus=1

"""Every SQL query behind the report and the analyst notebooks: the one source of truth.

Each number in the HTML report, the Markdown summary and the notebooks is the result of
one named query below, run through Spark SQL over views named like the tables (local
mode: temporary views over the Delta folders; cluster mode: ``USE <database>``).  The
report's appendix prints the query names and parameters, so a reader can re-run any
figure in a SQL editor.  Parameters are written as named markers (``:run_id``), the syntax
of Databricks SQL and notebook widgets; ``bind`` renders them as SQL literals before
``spark.sql`` because Spark's own parameter binding (``spark.sql(sql, args=...)``) fails
with UNBOUND_SQL_PARAMETER under the Delta session extension (Spark 4.2 / Delta 4.4).

Reads: runs, samples, passage_occurrences, extracted_passages, run_metrics, pii_findings,
candidates, reviews, rank_calibration, chance_baseline, corpus_documents.  Writes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..ids import id_literal

#: Tables the queries read.  Missing ones become empty views, so a run without PII or
#: ranking results still gets a report (with empty sections) rather than a SQL error.
QUERY_TABLES = (
    "runs", "samples", "passage_occurrences", "extracted_passages", "run_metrics", "pii_findings",
    "candidates", "reviews", "rank_calibration", "chance_baseline", "corpus_documents",
    "extracted_regions", "extracted_documents", "probes",
)


@dataclass(frozen=True)
class Query:
    name: str
    title: str
    sql: str

    @property
    def params(self) -> tuple[str, ...]:
        """Named parameters the SQL uses (``:name`` markers outside string literals)."""
        code = "".join(part for i, part in enumerate(_STRING_LITERAL.split(self.sql)) if i % 2 == 0)
        return tuple(dict.fromkeys(_MARKER.findall(code)))


_STRING_LITERAL = re.compile(r"('(?:[^'\\]|\\.)*')")
_MARKER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def sql_literal(value) -> str:
    """A parameter value as SQL: numbers and booleans as themselves, strings only when they
    are valid ids (``ids.id_literal``), lists as arrays.  Nothing is escaped: a value that
    would need escaping is refused."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else "NULL"
    if isinstance(value, (list, tuple)):
        items = [sql_literal(v) for v in value]
        return f"array({', '.join(items)})" if items else "CAST(array() AS ARRAY<STRING>)"
    return id_literal(str(value), "query parameter")


def bind(sql: str, params: dict) -> str:
    """Replace every ``:name`` marker outside string literals with ``params[name]`` as a literal."""
    def render(match: re.Match) -> str:
        name = match.group(1)
        if name not in params:
            raise ValueError(f"no value for SQL parameter :{name}")
        return sql_literal(params[name])

    parts = _STRING_LITERAL.split(sql)
    return "".join(part if i % 2 else _MARKER.sub(render, part) for i, part in enumerate(parts))


QUERIES: dict[str, Query] = {}


def _query(name: str, title: str, sql: str) -> str:
    QUERIES[name] = Query(name, title, sql.strip())
    return QUERIES[name].sql


def _wilson(k: str, n: str, bound: str) -> str:
    """SQL for the Wilson score interval bound of k successes in n trials at z = :z.

    Used for per-passage emission rates and confirmed-among-checked shares: for a
    binomial proportion it is what a bootstrap over samples approximates, without the
    resampling, and it stays inside [0, 1] for small counts."""
    sign = "-" if bound == "low" else "+"
    p = f"({k} / {n})"
    return (
        f"CASE WHEN {n} > 0 THEN ({p} + :z * :z / (2 * {n}) {sign} :z * sqrt({p} * (1 - {p}) / {n} "
        f"+ :z * :z / (4 * {n} * {n}))) / (1 + :z * :z / {n}) END"
    )


# ---------------------------------------------------------------------------------------
# Runs and growth curves
# ---------------------------------------------------------------------------------------

RUN_INFO = _query("RUN_INFO", "Runs and their control runs: model, corpus, budget, sampling, prompts", """
SELECT run_id, status, started_at, finished_at, model, model_name, model_family, tokenizer, corpus_id,
       get_json_object(config_json, '$.model.path') AS model_path, prompt_strategy, sampling, budget_tokens,
       generated_tokens, control_run_id,
       CAST(get_json_object(config_json, '$.index.n') AS INT) AS match_n,
       get_json_object(config_json, '$.generation.prompts') AS prompts_json,
       coalesce(nullif(array_position(:run_ids, run_id), 0), size(:run_ids) + 1) AS run_order
FROM runs
WHERE array_contains(:run_ids, run_id)
   OR run_id IN (SELECT control_run_id FROM runs WHERE array_contains(:run_ids, run_id))
ORDER BY run_order, run_id
""")

GROWTH_CURVE = _query("GROWTH_CURVE", "Growth curve: metrics at each budget checkpoint", """
SELECT m.run_id, r.model, r.model_name, m.budget_tokens,
       CASE WHEN coalesce(m.is_whole_run, false) THEN 'whole run' ELSE 'budget checkpoint' END AS scope,
       coalesce(m.is_whole_run, false) AS is_whole_run,
       m.generated_tokens, m.n_samples, m.extracted_tokens,
       m.share_extracted, m.distinct_passages, m.distinct_rare_passages, m.distinct_ngrams,
       m.pii_found, m.pii_in_corpus, m.distinct_regions, m.distinct_rare_regions, m.corpus_tokens_extracted,
       array_position(:run_ids, m.run_id) AS run_order
FROM run_metrics m
LEFT JOIN runs r ON r.run_id = m.run_id
WHERE array_contains(:run_ids, m.run_id)
ORDER BY run_order, m.budget_tokens
""")

COMPARE_AT_EQUAL_BUDGETS = _query(
    "COMPARE_AT_EQUAL_BUDGETS",
    "Two runs at the budget checkpoints both have (no interpolation)", """
SELECT a.budget_tokens,
       a.generated_tokens AS generated_tokens_a, b.generated_tokens AS generated_tokens_b,
       a.n_samples AS n_samples_a, b.n_samples AS n_samples_b,
       a.distinct_passages AS distinct_passages_a, b.distinct_passages AS distinct_passages_b,
       a.distinct_rare_passages AS distinct_rare_passages_a,
       b.distinct_rare_passages AS distinct_rare_passages_b,
       a.share_extracted AS share_extracted_a, b.share_extracted AS share_extracted_b
FROM run_metrics a
JOIN run_metrics b ON a.budget_tokens = b.budget_tokens
WHERE a.run_id = :run_id AND b.run_id = :other_run_id
ORDER BY a.budget_tokens
""")

# ---------------------------------------------------------------------------------------
# Whole-run headline numbers and the inputs of their uncertainty
# ---------------------------------------------------------------------------------------

HEADLINE = _query("HEADLINE", "Headline counts per run, whole run (low-entropy filler and prompt copies "
                   "excluded)", """
WITH r AS (
  SELECT run_id FROM runs WHERE array_contains(:run_ids, run_id)
),
s AS (
  SELECT run_id, count(*) AS samples, sum(n_tokens) AS generated_tokens
  FROM samples WHERE array_contains(:run_ids, run_id)
  GROUP BY run_id
),
p AS (
  SELECT run_id,
         count_if(counted) AS distinct_passages,
         count_if(counted AND doc_count BETWEEN 1 AND :rare_doc_count) AS distinct_rare_passages,
         count_if(counted AND doc_count = 1) AS single_document_passages,
         count_if(counted AND doc_count = 0) AS stitched_passages,
         count_if(is_low_entropy) AS low_entropy_passages,
         count_if(NOT is_low_entropy AND NOT counted) AS prompt_copy_passages,
         count_if(counted AND first_seen_run_id = run_id) AS new_passages
  FROM (SELECT *, NOT is_low_entropy AND NOT coalesce(is_prompt_copy, false) AS counted
        FROM extracted_passages WHERE array_contains(:run_ids, run_id))
  GROUP BY run_id
),
o AS (
  SELECT o.run_id, sum(o.`end` - o.start) AS extracted_tokens,
         count(DISTINCT o.sample_id) AS samples_with_passage
  FROM passage_occurrences o
  JOIN extracted_passages p ON p.run_id = o.run_id AND p.passage_id = o.passage_id
  WHERE array_contains(:run_ids, o.run_id) AND NOT p.is_low_entropy AND NOT coalesce(p.is_prompt_copy, false)
  GROUP BY o.run_id
),
pii AS (
  SELECT run_id, count(DISTINCT value_key) AS pii_found,
         count(DISTINCT CASE WHEN in_corpus THEN value_key END) AS pii_in_corpus
  FROM pii_findings WHERE array_contains(:run_ids, run_id)
  GROUP BY run_id
),
g AS (
  SELECT run_id, count(*) AS distinct_regions, count_if(is_rare) AS distinct_rare_regions,
         sum(n_tokens) AS corpus_tokens_extracted, count(DISTINCT doc_id) AS source_documents
  FROM extracted_regions WHERE array_contains(:run_ids, run_id)
  GROUP BY run_id
)
SELECT r.run_id,
       coalesce(s.samples, 0) AS samples,
       coalesce(s.generated_tokens, 0) AS generated_tokens,
       coalesce(o.extracted_tokens, 0) AS extracted_tokens,
       coalesce(o.extracted_tokens, 0) / nullif(s.generated_tokens, 0) AS share_extracted,
       coalesce(p.distinct_passages, 0) AS distinct_passages,
       coalesce(p.distinct_rare_passages, 0) AS distinct_rare_passages,
       coalesce(p.single_document_passages, 0) AS single_document_passages,
       coalesce(p.stitched_passages, 0) AS stitched_passages,
       coalesce(p.low_entropy_passages, 0) AS low_entropy_passages,
       coalesce(p.prompt_copy_passages, 0) AS prompt_copy_passages,
       coalesce(p.new_passages, 0) AS new_passages,
       coalesce(o.samples_with_passage, 0) AS samples_with_passage,
       coalesce(pii.pii_found, 0) AS pii_found,
       coalesce(pii.pii_in_corpus, 0) AS pii_in_corpus,
       coalesce(g.distinct_regions, 0) AS distinct_regions,
       coalesce(g.distinct_rare_regions, 0) AS distinct_rare_regions,
       coalesce(g.corpus_tokens_extracted, 0) AS corpus_tokens_extracted,
       coalesce(g.source_documents, 0) AS source_documents
FROM r
LEFT JOIN s ON s.run_id = r.run_id
LEFT JOIN p ON p.run_id = r.run_id
LEFT JOIN o ON o.run_id = r.run_id
LEFT JOIN pii ON pii.run_id = r.run_id
LEFT JOIN g ON g.run_id = r.run_id
ORDER BY array_position(:run_ids, r.run_id)
""")

PER_SAMPLE_SUMMARY = _query(
    "PER_SAMPLE_SUMMARY",
    "One row per sample: tokens, extracted tokens and the (hashed) passages and PII values it emitted", """
WITH passages AS (
  SELECT run_id, passage_id, doc_count BETWEEN 1 AND :rare_doc_count AS is_rare
  FROM extracted_passages WHERE array_contains(:run_ids, run_id) AND NOT is_low_entropy
        AND NOT coalesce(is_prompt_copy, false)
),
occ AS (
  SELECT o.run_id, o.sample_id,
         sum(o.`end` - o.start) AS extracted_tokens,
         collect_set(xxhash64(o.passage_id)) AS passage_keys,
         collect_set(CASE WHEN p.is_rare THEN xxhash64(o.passage_id) END) AS rare_passage_keys
  FROM passage_occurrences o JOIN passages p ON p.run_id = o.run_id AND p.passage_id = o.passage_id
  WHERE array_contains(:run_ids, o.run_id)
  GROUP BY o.run_id, o.sample_id
),
pii AS (
  SELECT run_id, sample_id,
         collect_set(xxhash64(value_key)) AS pii_keys,
         collect_set(CASE WHEN in_corpus THEN xxhash64(value_key) END) AS pii_in_corpus_keys
  FROM pii_findings WHERE array_contains(:run_ids, run_id)
  GROUP BY run_id, sample_id
)
SELECT s.run_id, s.sample_id, s.n_tokens,
       coalesce(occ.extracted_tokens, 0) AS extracted_tokens,
       coalesce(occ.passage_keys, array()) AS passage_keys,
       coalesce(occ.rare_passage_keys, array()) AS rare_passage_keys,
       coalesce(pii.pii_keys, array()) AS pii_keys,
       coalesce(pii.pii_in_corpus_keys, array()) AS pii_in_corpus_keys
FROM samples s
LEFT JOIN occ ON occ.run_id = s.run_id AND occ.sample_id = s.sample_id
LEFT JOIN pii ON pii.run_id = s.run_id AND pii.sample_id = s.sample_id
WHERE array_contains(:run_ids, s.run_id)
""")

PASSAGE_FREQUENCY_COUNTS = _query(
    "PASSAGE_FREQUENCY_COUNTS",
    "How many passages were emitted by exactly k samples (input of the extrapolation)", """
SELECT run_id,
       n_samples AS k,
       count(*) AS passages,
       count_if(doc_count BETWEEN 1 AND :rare_doc_count) AS rare_passages
FROM extracted_passages
WHERE array_contains(:run_ids, run_id) AND NOT is_low_entropy
        AND NOT coalesce(is_prompt_copy, false)
GROUP BY run_id, n_samples
ORDER BY run_id, k
""")

PROMPT_STRATEGY_BREAKDOWN = _query(
    "PROMPT_STRATEGY_BREAKDOWN", "Extraction by prompt strategy", """
WITH occ AS (
  SELECT o.sample_id, o.passage_id, o.`end` - o.start AS tokens
  FROM passage_occurrences o
  JOIN extracted_passages p ON p.run_id = o.run_id AND p.passage_id = o.passage_id
  WHERE o.run_id = :run_id AND NOT p.is_low_entropy AND NOT coalesce(p.is_prompt_copy, false)
),
per_sample AS (
  SELECT sample_id, sum(tokens) AS extracted_tokens FROM occ GROUP BY sample_id
),
strategy_passages AS (
  SELECT s.prompt_strategy, count(DISTINCT occ.passage_id) AS distinct_passages
  FROM occ JOIN samples s ON s.run_id = :run_id AND s.sample_id = occ.sample_id
  GROUP BY s.prompt_strategy
)
SELECT s.prompt_strategy,
       count(*) AS samples,
       sum(s.n_tokens) AS generated_tokens,
       coalesce(sum(ps.extracted_tokens), 0) AS extracted_tokens,
       coalesce(sum(ps.extracted_tokens), 0) / nullif(sum(s.n_tokens), 0) AS share_extracted,
       coalesce(max(sp.distinct_passages), 0) AS distinct_passages
FROM samples s
LEFT JOIN per_sample ps ON ps.sample_id = s.sample_id
LEFT JOIN strategy_passages sp ON sp.prompt_strategy = s.prompt_strategy
WHERE s.run_id = :run_id
GROUP BY s.prompt_strategy
ORDER BY samples DESC, s.prompt_strategy
""")

# ---------------------------------------------------------------------------------------
# Passages
# ---------------------------------------------------------------------------------------

DOC_COUNT_HISTOGRAM = _query(
    "DOC_COUNT_HISTOGRAM",
    "Passages by the number of corpus documents containing them (1-2: privacy findings)", """
WITH bucketed AS (
  SELECT CASE WHEN doc_count <= 0 THEN 0 WHEN doc_count = 1 THEN 1 WHEN doc_count = 2 THEN 2
              WHEN doc_count < 10 THEN 3 WHEN doc_count < 100 THEN 4 WHEN doc_count < 1000 THEN 5
              ELSE 6 END AS bucket_order,
         is_low_entropy OR coalesce(is_prompt_copy, false) AS excluded, n_samples
  FROM extracted_passages WHERE run_id = :run_id
),
buckets AS (
  SELECT * FROM VALUES (0, '0 (stitched)'), (1, '1'), (2, '2'), (3, '3-9'), (4, '10-99'),
                       (5, '100-999'), (6, '1000+') AS b(bucket_order, doc_count_bucket)
)
SELECT b.bucket_order, b.doc_count_bucket,
       count_if(NOT x.excluded) AS passages,
       count_if(x.excluded) AS excluded_passages,
       coalesce(sum(CASE WHEN NOT x.excluded THEN x.n_samples END), 0) AS emitting_samples
FROM buckets b LEFT JOIN bucketed x ON x.bucket_order = b.bucket_order
GROUP BY b.bucket_order, b.doc_count_bucket
ORDER BY b.bucket_order
""")

_PASSAGE_COLUMNS = f"""
       p.passage_id, p.n_tokens, p.n_samples,
       p.n_samples / n.samples AS emission_rate,
       {_wilson("p.n_samples", "n.samples", "low")} AS emission_rate_low,
       {_wilson("p.n_samples", "n.samples", "high")} AS emission_rate_high,
       p.doc_count, p.doc_count_is_exact, p.example_doc_ids, p.first_seen_run_id,
       CASE WHEN :redact THEN concat('[redacted passage, ', p.n_tokens, ' tokens]') ELSE p.text END AS text"""


def _passage_query(name: str, title: str, condition: str, order: str) -> str:
    """A list of a run's counted passages (not filler, not prompt copies) with their emission
    rate per sample; ``condition`` narrows it, ``order`` ends with the passage id (ties)."""
    return _query(name, title, f"""
WITH n AS (SELECT count(*) AS samples FROM samples WHERE run_id = :run_id)
SELECT {_PASSAGE_COLUMNS}
FROM extracted_passages p CROSS JOIN n
WHERE p.run_id = :run_id AND NOT p.is_low_entropy AND NOT coalesce(p.is_prompt_copy, false){condition}
ORDER BY {order}
LIMIT :limit
""")


_BY_EMISSION = "p.n_samples DESC, p.n_tokens DESC, p.passage_id"
_BY_DOC_COUNT = "p.doc_count, p.n_samples DESC, p.passage_id"

TOP_RARE_PASSAGES = _passage_query(
    "TOP_RARE_PASSAGES",
    "Most emitted rare passages (in 1 or 2 corpus documents), with emission rate per sample",
    "\n  AND p.doc_count BETWEEN 1 AND :rare_doc_count", _BY_EMISSION)

TOP_EMITTED_PASSAGES = _passage_query(
    "TOP_EMITTED_PASSAGES",
    "Passages with the highest emission rate per sample (any document count)", "", _BY_EMISSION)

NEW_PASSAGES = _passage_query(
    "NEW_PASSAGES", "Passages this run emitted first within its model family",
    "\n  AND p.first_seen_run_id = :run_id", _BY_DOC_COUNT)

PASSAGES_NOT_IN_RUN = _passage_query(
    "PASSAGES_NOT_IN_RUN", "Passages of a run that another (e.g. last night's) run did not emit",
    """
  AND NOT EXISTS (SELECT 1 FROM extracted_passages q
                  WHERE q.run_id = :other_run_id AND q.passage_id = p.passage_id)""", _BY_DOC_COUNT)

STITCHED_PASSAGES = _passage_query(
    "STITCHED_PASSAGES",
    "Passages stitched from windows of different documents (doc_count 0): listed apart, never rare findings",
    "\n  AND p.doc_count = 0", _BY_EMISSION)

SOURCE_DOCUMENTS = _query(
    "SOURCE_DOCUMENTS",
    "Corpus documents the run reproduced, by corpus tokens extracted (regions merged per document)", """
SELECT doc_id, source, doc_tokens, regions, rare_regions, tokens_extracted, share_of_document,
       n_passages, n_samples, pii_types
FROM extracted_documents
WHERE run_id = :run_id
ORDER BY tokens_extracted DESC, n_samples DESC, doc_id
LIMIT :limit
""")

PREVIOUS_RUN = _query(
    "PREVIOUS_RUN", "The latest earlier run of the same model family (e.g. last night's)", """
SELECT r.run_id, r.started_at, r.status
FROM runs r JOIN runs cur ON cur.run_id = :run_id
WHERE r.model_family <=> cur.model_family AND r.started_at < cur.started_at
ORDER BY r.started_at DESC, r.run_id DESC
LIMIT 1
""")

LATEST_RUNS = _query("LATEST_RUNS", "Most recent runs", """
SELECT run_id, status, started_at, model, model_family, budget_tokens, generated_tokens
FROM runs
ORDER BY started_at DESC, run_id DESC
LIMIT :limit
""")

RARE_PASSAGES_WITH_DOCUMENTS = _query(
    "RARE_PASSAGES_WITH_DOCUMENTS",
    "Rare passages with the corpus documents that contain them (context around the passage)", """
WITH rare AS (
  SELECT p.passage_id, p.doc_count, p.n_samples, p.n_tokens, p.text, p.example_doc_ids, r.corpus_id
  FROM extracted_passages p JOIN runs r ON r.run_id = p.run_id
  WHERE p.run_id = :run_id AND NOT p.is_low_entropy AND NOT coalesce(p.is_prompt_copy, false)
  AND p.doc_count BETWEEN 1 AND :rare_doc_count
  ORDER BY p.n_samples DESC, p.n_tokens DESC, p.passage_id
  LIMIT :limit
),
docs AS (
  SELECT rare.*, doc_id FROM rare LATERAL VIEW explode(example_doc_ids) e AS doc_id
)
SELECT docs.passage_id, docs.doc_count, docs.n_samples, docs.doc_id, d.source,
       CASE WHEN :redact THEN concat('[redacted passage, ', docs.n_tokens, ' tokens]')
            ELSE docs.text END AS passage_text,
       CASE WHEN :redact OR d.text IS NULL THEN NULL
            ELSE substr(d.text, greatest(1, instr(d.text, docs.text) - 200),
                        length(docs.text) + 400) END AS document_context
FROM docs
LEFT JOIN corpus_documents d ON d.corpus_id = docs.corpus_id AND d.doc_id = docs.doc_id
ORDER BY docs.n_samples DESC, docs.passage_id, docs.doc_id
""")

# ---------------------------------------------------------------------------------------
# PII, corpus-free route, chance baseline
# ---------------------------------------------------------------------------------------

PII_BY_TYPE = _query("PII_BY_TYPE", "Personal data by entity type (redacted values only)", """
WITH f AS (
  SELECT * FROM pii_findings WHERE run_id = :run_id
),
per_value AS (
  SELECT entity_type, value_key,
         bool_or(in_corpus) AS in_corpus,
         max(corpus_doc_count) AS corpus_doc_count,
         bool_or(corpus_lookup NOT IN ('search', 'not_found')) AS not_counted
  FROM f GROUP BY entity_type, value_key
),
by_value AS (
  SELECT entity_type,
         count(*) AS distinct_values,
         count_if(in_corpus) AS distinct_in_corpus,
         count_if(in_corpus AND corpus_doc_count BETWEEN 1 AND :rare_doc_count) AS distinct_in_rare_documents,
         coalesce(sum(corpus_doc_count), 0) AS corpus_value_documents,
         max(corpus_doc_count) AS max_corpus_doc_count,
         count_if(not_counted) AS values_not_counted
  FROM per_value GROUP BY entity_type
),
by_finding AS (
  SELECT entity_type, count(*) AS findings, count(DISTINCT sample_id) AS samples,
         slice(array_sort(collect_set(value_redacted)), 1, 3) AS examples_redacted
  FROM f GROUP BY entity_type
)
SELECT b.entity_type, b.findings, b.samples,
       v.distinct_values, v.distinct_in_corpus, v.distinct_in_rare_documents,
       v.corpus_value_documents, v.max_corpus_doc_count, v.values_not_counted,
       b.examples_redacted
FROM by_finding b JOIN by_value v ON v.entity_type = b.entity_type
ORDER BY v.distinct_in_corpus DESC, v.distinct_values DESC, b.entity_type
""")

CONFIRMED_AMONG_CHECKED = _query(
    "CONFIRMED_AMONG_CHECKED",
    "Corpus-free route: candidates checked by hand and how many were confirmed", f"""
WITH verdicts AS (
  SELECT sample_id,
         bool_or(verdict = 'confirmed') AS confirmed,
         bool_or(verdict = 'not_found') AS not_found
  FROM reviews WHERE run_id = :run_id
  GROUP BY sample_id
),
c AS (SELECT count(*) AS candidates FROM candidates WHERE run_id = :run_id),
v AS (
  SELECT CAST(count(*) AS BIGINT) AS checked,
         CAST(count_if(confirmed) AS BIGINT) AS confirmed,
         CAST(count_if(NOT confirmed AND not_found) AS BIGINT) AS not_found,
         CAST(count_if(NOT confirmed AND NOT not_found) AS BIGINT) AS unsure
  FROM verdicts
),
t AS (SELECT c.candidates, v.* FROM c CROSS JOIN v)
SELECT t.*, t.confirmed / nullif(t.checked, 0) AS share_confirmed,
       {_wilson("t.confirmed", "t.checked", "low")} AS share_confirmed_low,
       {_wilson("t.confirmed", "t.checked", "high")} AS share_confirmed_high
FROM t
""")

RANK_CALIBRATION = _query(
    "RANK_CALIBRATION", "How well each membership score finds verified extractions", """
SELECT score, k_requested, k, precision_at_k, auc, n_positive, n_ranked
FROM rank_calibration
WHERE run_id = :run_id
ORDER BY score, k_requested
""")

CHANCE_BASELINE = _query(
    "CHANCE_BASELINE", "Share of held-out human text matched by chance (same matcher)", """
SELECT source, corpus_id, n, sequences, generated_tokens, extracted_tokens, share_extracted,
       share_extracted_low, share_extracted_high, confidence, distinct_passages, computed_at
FROM chance_baseline
WHERE run_id = :run_id
ORDER BY source
""")

# Known-prefix probes (``probe`` step): per-probe outcomes (bounded by probe.max_probes) for
# the bootstrap in ``probe.summary``, and the budget checkpoints of the recovery share.
_query(
    "PROBE_OUTCOMES", "Known-prefix probes: one row per run, probe and mode", """
SELECT run_id, probe_id, mode, source, doc_count_class, suffix_doc_count, stratum_size, exact, longest_match,
       edit_similarity, found_by_sampling, found_at_tokens
FROM probes
WHERE array_contains(:run_ids, run_id)
ORDER BY run_id, mode, probe_id
""")

_query(
    "PROBE_RATES", "Discoverable memorisation by document-count class (unweighted, for SQL users)", """
SELECT run_id, mode, doc_count_class, count(*) AS probes, avg(CAST(exact AS DOUBLE)) AS exact_rate,
       avg(CAST(edit_similarity >= :approx_similarity AS DOUBLE)) AS approx_rate,
       avg(CAST(found_by_sampling AS DOUBLE)) AS found_by_sampling_rate
FROM probes
WHERE run_id = :run_id
GROUP BY run_id, mode, doc_count_class
ORDER BY mode, min(suffix_doc_count)
""")

_query(
    "PROBE_CHECKPOINTS", "Budget checkpoints of each run (for the recovery share)", """
SELECT run_id, budget_tokens
FROM run_metrics
WHERE array_contains(:run_ids, run_id)
ORDER BY run_id, budget_tokens
""")

# Queries the HTML report runs (in order); the others are for notebooks.
REPORT_QUERIES = (
    "RUN_INFO", "GROWTH_CURVE", "COMPARE_AT_EQUAL_BUDGETS", "HEADLINE", "PER_SAMPLE_SUMMARY",
    "PASSAGE_FREQUENCY_COUNTS", "PROMPT_STRATEGY_BREAKDOWN", "DOC_COUNT_HISTOGRAM", "TOP_RARE_PASSAGES",
    "TOP_EMITTED_PASSAGES", "STITCHED_PASSAGES", "SOURCE_DOCUMENTS", "PII_BY_TYPE", "CONFIRMED_AMONG_CHECKED",
    "RANK_CALIBRATION", "CHANCE_BASELINE",
    "PROBE_OUTCOMES", "PROBE_CHECKPOINTS",
)


# ---------------------------------------------------------------------------------------
# Running them
# ---------------------------------------------------------------------------------------

def use_tables(spark, cfg) -> list[str]:
    """Make the tables visible to SQL under their plain names; returns the missing ones.

    Local mode: temporary views over the Delta folders.  Cluster mode: ``USE database``.
    A missing table becomes an empty temporary view with the table's schema, so queries
    over optional results (PII, ranking, chance baseline) return no rows instead of failing.
    """
    from ..tables import TABLES, Tables

    tables = Tables(spark, cfg)
    if tables.database:
        spark.sql(f"USE `{tables.database}`")
    missing = []
    for name in QUERY_TABLES:
        if name not in TABLES:
            continue
        if tables.exists(name):
            if not tables.database:
                spark.sql(f"CREATE OR REPLACE TEMP VIEW `{name}` AS SELECT * FROM {tables.ref(name)}")
            continue
        missing.append(name)
        spark.createDataFrame([], TABLES[name].schema).createOrReplaceTempView(name)
    return missing


def sql_df(spark, name: str, **params):
    """Run the named query with its parameters; returns a Spark DataFrame."""
    query = QUERIES[name]
    missing = [p for p in query.params if p not in params]
    if missing:
        raise ValueError(f"query {name} needs parameters {missing}")
    return spark.sql(bind(query.sql, params))


def run_query(spark, name: str, **params):
    """Run the named query and return a pandas DataFrame (every query here returns a bounded
    number of rows: per run, per checkpoint, per bucket, ``LIMIT``, or per sample)."""
    return sql_df(spark, name, **params).toPandas()

"""Corpus document counts of personal data are counted by value, not by re-detection.

A small corpus writes each value in several phrasings and formats (spacing, dashes,
brackets, +44 / 0044 / (0) / 0 prefixes, case), some with no cue a detector needs, beside
near misses (the digits inside a longer number, a different value).  ``corpus_doc_count``
and ``example_doc_ids`` must equal a brute-force search of the same surface forms written
here independently of ``search.py``: one regex per form over the raw text.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from conftest import make_config
from extraction_audit.pii import normalise as norm
from extraction_audit.pii import run_pii
from extraction_audit.pii.detectors import DetectionSettings
from extraction_audit.pii.keys import value_key
from extraction_audit.pii.search import FormSearcher, values_in_reference
from extraction_audit.tables import Tables

CUSTOM = [{"name": "customer_id", "pattern": r"\bCUST-\d{6}\b"}]

# (entity_type, normalised) -> how many corpus documents hold it (planted below)
VALUES = {
    ("phone", "+442079460958"): 8,
    ("card", "4111111111111111"): 4,
    ("email", "jane.doe@example.com"): 3,
    ("nhs_number", "9434765870"): 3,
    ("us_ssn", "536228726"): 3,
    ("iban", "GB82WEST12345698765432"): 2,
    ("uk_nino", "AB123456C"): 3,
    ("uk_bank_account", "404784:70872490"): 3,
    ("date_of_birth", "1985-04-03"): 3,
    ("ip_address", "81.2.69.160"): 2,
    ("person_name", "jane smith"): 6,
    ("customer_id", "CUST-004217"): 2,
}

CORPUS = {
    # the phone in eight spellings; several carry no cue, one sits under a "ref" label
    "p1": "Call Jane Smith on 020 7946 0958 after six.",
    "p2": "Office line +44 20 7946 0958 (switchboard).",
    "p3": "From abroad dial +44 (0)20 7946 0958 instead.",
    "p4": "Old directory entry: 0044 20 7946 0958.",
    "p5": "Ref (020) 7946-0958 noted on the file.",
    "p6": "Fax:020.7946.0958",
    "p7": "contact 02079460958 via the desk",
    "p8": "Numbers on the wall: 14 020 7946 0958 22",
    "p-decoy": "Serial 1020 7946 09581 and 020 7946 0959 are not it.",
    # the card four ways (one followed by an expiry, one glued to a word)
    "c1": "Card 4111 1111 1111 1111 on file.",
    "c2": "paid with 4111-1111-1111-1111 exp 12/27",
    "c3": "visa4111111111111111 in the log",
    "c4": "4111 1111 1111 1111 2027 renewal",
    "c-decoy": "94111111111111111 and 4111 1111 1111 1112 differ.",
    # email, case and punctuation around it
    "e1": "Write to JANE.DOE@EXAMPLE.COM today.",
    "e2": "(jane.doe@example.com)",
    "e3": "mailto:Jane.Doe@Example.com",
    "e-decoy": "xjane.doe@example.com and jane.doe@example.community are other addresses.",
    # NHS number: canonical spacing, dashes without a cue, bare digits without a cue
    "n1": "NHS number 943 476 5870 for the patient.",
    "n2": "Record 943-476-5870 was merged.",
    "n3": "id=9434765870;",
    # SSN with and without its usual cue
    "s1": "SSN 536-22-8726 on the form.",
    "s2": "Applicant 536 22 8726 signed.",
    "s3": "row 536228726 |",
    # IBAN spaced and in lower case (the detector wants capitals)
    "i1": "Pay GB82 WEST 1234 5698 7654 32 by Friday.",
    "i2": "iban gb82west12345698765432 copied",
    # NINO spaced, lower case, mixed case
    "ni1": "NI number AB 12 34 56 C.",
    "ni2": "ab123456c was given.",
    "ni3": "Ref Ab123456C pending.",
    # sort code + account, with and without banking words
    "b1": "Sort code 40-47-84, account 70872490.",
    "b2": "s/c 404784 a/c 70872490",
    "b3": "Details: 40 47 84 / 70872490",
    "b-decoy": "Sort code 40-47-84 only, no account given.",
    # date of birth written many ways, not always after a cue
    "d1": "DOB 03/04/1985 per the letter.",
    "d2": "She was born 3 April 1985 in Leeds.",
    "d3": "April 3rd, 1985 is on the certificate.",
    "d-decoy": "Paid on 13/04/1985 and 03/04/1986.",
    # IP address
    "ip1": "Login from 81.2.69.160 blocked.",
    "ip2": "[81.2.69.160]:443",
    "ip-decoy": "Host 181.2.69.160 and 81.2.69.16 differ.",
    # names in capitals, reversed, with a title and accents stripped
    "j1": "JANE SMITH signed the form.",
    "j2": "Smith, Jane (applicant)",
    "j3": "Dear Dr. Jane Smith,",
    "j4": "Jane\n  Smith wrote back.",
    "j5": "Jané Smith (accent dropped by the canonical form)",
    "j-decoy": "Janet Smithers and Jane Smithson came too.",
    # custom id in lower case
    "u1": "Ticket cust-004217 raised.",
    "u2": "CUST-004217 closed.",
    "plain": "Nothing personal in this document about the weather.",
}

SAMPLES = {
    0: "Call me on +44 20 7946 0958 please.",
    1: "Card number 4111 1111 1111 1111 expires soon.",
    2: "Email jane.doe@example.com for details.",
    3: "NHS number 943 476 5870 is mine.",
    4: "My SSN is 536-22-8726.",
    5: "IBAN GB82 WEST 1234 5698 7654 32 for transfers.",
    6: "National insurance number AB 12 34 56 C.",
    7: "Sort code 40-47-84, account number 70872490.",
    8: "Date of birth: 03/04/1985.",
    9: "Connected from 81.2.69.160 today.",
    10: "Patient: Jane Smith was seen.",
    11: "Customer CUST-004217 complained.",
}

# -- the brute-force oracle (independent of search.py) ------------------------------------

_SEP = r"[\s\-\u2010-\u2015./()\[\]]*"


def _guard(ch: str) -> str:
    """What may not touch a compact form's edge: a character of the same class."""
    return "[0-9]" if ch.isdigit() else r"[^\W\d_]"


def compact_occurs(text: str, form: str) -> bool:
    pattern = (rf"(?<!{_guard(form[0])})" + _SEP.join(re.escape(c) for c in form)
               + rf"(?!{_guard(form[-1])})")
    return re.search(pattern, text, re.IGNORECASE) is not None


def plain_occurs(text: str, form: str) -> bool:
    stripped = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    view = re.sub(r"\s+", " ", stripped.lower())

    def edge(ch: str) -> str:
        return "[0-9]" if ch.isdigit() else r"[^\W_]" if ch.isalnum() else "(?!)"

    pattern = rf"(?<!{edge(form[0])})" + re.escape(form) + rf"(?!{edge(form[-1])})"
    return re.search(pattern, view) is not None


def brute_force_docs(corpus: dict[str, str], requirements: list[list[str]]) -> list[str]:
    def occurs(text: str, form: str) -> bool:
        kind, body = form[:2], form[2:]
        return compact_occurs(text, body) if kind == norm.COMPACT else plain_occurs(text, body)

    return sorted(doc_id for doc_id, text in corpus.items()
                  if all(any(occurs(text, f) for f in req) for req in requirements))


def _requirements(entity_type: str, normalised: str) -> list[list[str]]:
    return norm.search_requirements(entity_type, normalised, "", day_first=True)


# -- kernel: fast path == plain reference == brute force ----------------------------------

def test_searcher_equals_reference_and_brute_force():
    values = [(t, f"k{i}", _requirements(t, n)) for i, (t, n) in enumerate(VALUES)]
    searcher = FormSearcher(values)
    for doc_id, text in CORPUS.items():
        fast = searcher.values_in(text)
        assert fast == values_in_reference(text, values), doc_id
        oracle = [i for i, (_, _, reqs) in enumerate(values) if brute_force_docs({doc_id: text}, reqs)]
        assert fast == oracle, doc_id
    for (entity_type, normalised), expected in VALUES.items():
        assert len(brute_force_docs(CORPUS, _requirements(entity_type, normalised))) == expected, entity_type


def test_forms_cover_phone_prefixes_and_compact_boundaries():
    forms = _requirements("phone", "+442079460958")[0]
    assert {"c:02079460958", "c:442079460958", "c:00442079460958", "c:4402079460958"} <= set(forms)
    searcher = FormSearcher([("phone", "k", [forms])])
    for text in ("+44 (0)20 7946 0958", "0044-20-7946-0958", "tel:020 7946 0958", "(020)79460958"):
        assert searcher.values_in(text) == [0], text
    for text in ("1020 7946 0958", "020 7946 09581", "020 7946 0959"):
        assert searcher.values_in(text) == [], text


# -- the pii stage on real Spark + Delta ---------------------------------------------------

@pytest.fixture(scope="module")
def counted(spark, tmp_path_factory):
    tmp_path: Path = tmp_path_factory.mktemp("pii-counts")
    cfg = make_config(tmp_path, pii={"custom": CUSTOM, "example_doc_ids": 3})
    tables = Tables(spark, cfg)
    tables.merge("corpus_documents", spark.createDataFrame(
        [("demo", d, t, "test") for d, t in CORPUS.items()],
        "corpus_id STRING, doc_id STRING, text STRING, source STRING"))
    tables.merge("samples", spark.createDataFrame(
        [("counts", i, t) for i, t in SAMPLES.items()], "run_id STRING, sample_id BIGINT, text STRING"))
    stats = run_pii(spark, cfg, "counts")
    rows = tables.read("pii_findings").where(F.col("run_id") == "counts").collect()
    return cfg, tables, stats, rows


def test_corpus_counts_equal_brute_force(counted):
    cfg, _, stats, rows = counted
    key = DetectionSettings.from_config(cfg).key
    by_key = {value_key(key, t, n): (t, n) for t, n in VALUES}
    found = {r["value_key"]: r for r in rows if r["value_key"] in by_key}
    assert set(found) == set(by_key), sorted(by_key[k] for k in set(by_key) - set(found))
    table = []
    for k, row in found.items():
        entity_type, normalised = by_key[k]
        docs = brute_force_docs(CORPUS, _requirements(entity_type, normalised))
        table.append((entity_type, row["index_doc_count"], row["corpus_doc_count"], len(docs)))
        assert row["corpus_lookup"] == "search" and row["in_corpus"] is True, entity_type
        assert row["corpus_doc_count"] == len(docs) == VALUES[(entity_type, normalised)], entity_type
        assert row["example_doc_ids"] == docs[:3], entity_type
    print("\n".join(f"{t:<16} index {i}  by value {c}  brute force {b}" for t, i, c, b in sorted(table)))
    # re-detection alone under-counts: the index never decides the count
    assert sum(r[1] for r in table) < sum(r[2] for r in table)
    assert stats["lookup"]["index_undercounted"] >= 6 and stats["lookup"]["search_below_index"] == 0
    assert stats["lookup"]["searched"] == stats["lookup"]["distinct_values"]


def test_no_raw_values_stored(counted):
    _, tables, _, rows = counted
    assert rows and all(r["value"] is None for r in rows)
    cells = " ".join(str(v) for r in tables.read("pii_findings").collect() for v in r.asDict().values())
    for raw in ("4111111111111111", "jane.doe@example.com", "9434765870", "GB82WEST12345698765432",
                "70872490", "81.2.69.160", "jane smith", "CUST-004217", "2079460958"):
        assert raw not in cells


# -- held-out caveats and masking of shown text --------------------------------------------

def test_heldout_figures_equal_a_fresh_scoring():
    import sys

    from extraction_audit.pii.evaluation import HELDOUT_COUNTS, load_snippets, score, detector_set_scorer

    sys.path.insert(0, str(Path(__file__).resolve().parent / "pii_eval"))
    from score import HERE, default_detector_set

    scores = score(load_snippets(HERE / "heldout.jsonl"), detector_set_scorer(default_detector_set()))
    assert {t: (s.gold, s.found, s.detections, s.true_detections) for t, s in scores.items()} == HELDOUT_COUNTS


PASSAGE = ("Card 4111 1111 1111 1111, SSN 536-22-8726, NHS number 943 476 5870, "
           "email jane.doe@example.com, call +44 20 7946 0958.")
RAW = ["4111 1111 1111 1111", "536-22-8726", "943 476 5870", "jane.doe@example.com", "+44 20 7946 0958"]


def test_shown_text_is_masked_unless_raw_pii_allowed(spark, tmp_path):
    """Report (HTML, JSON, model card) and review page mask every detected value in
    passage and sample text by default; storage.allow_raw_pii shows the raw text."""
    import pandas as pd

    from extraction_audit.rank.review import render_html
    from extraction_audit.report.build import build_report
    from extraction_audit.pii.mask import mask_frame
    from extraction_audit.runs import RunRecord

    for allow in (False, True):
        cfg = make_config(tmp_path / str(allow), storage={"allow_raw_pii": allow}, pii={"custom": CUSTOM})
        tables = Tables(spark, cfg)
        RunRecord(tables, "shown").create(cfg)
        tables.merge("samples", spark.createDataFrame(
            [("shown", i, PASSAGE if i == 0 else "Nothing to see.", 40) for i in range(3)],
            "run_id STRING, sample_id BIGINT, text STRING, n_tokens INT"))
        tables.merge("extracted_passages", spark.createDataFrame(
            [("shown", "p1", PASSAGE, 40, 1, 1, True, ["d1"], False, False)],
            "run_id STRING, passage_id STRING, text STRING, n_tokens INT, n_samples BIGINT, doc_count BIGINT, "
            "doc_count_is_exact BOOLEAN, example_doc_ids ARRAY<STRING>, is_low_entropy BOOLEAN, "
            "is_prompt_copy BOOLEAN"))
        out = build_report(spark, cfg, "shown", out_dir=tmp_path / f"report-{allow}")
        pages = {k: Path(out[k]).read_text() for k in ("html", "json", "markdown")}
        queue = mask_frame(cfg, pd.DataFrame({"sample_id": [0], "top_by": ["t"], "prompt_text": ["Tell me"],
                                            "text": [PASSAGE]}),
                           ["prompt_text", "text"])
        pages["review"] = render_html(queue, "shown", 1, [], "review.csv")
        for name, page in pages.items():
            if name == "markdown":
                continue  # the model card shows no passage text, only counts
            shown = [raw for raw in RAW if raw in page]
            if allow:
                assert shown == RAW, name
            else:
                assert shown == [], (name, shown)
                assert "[card **** **** **** 1111]" in page and "[us_ssn ***-**-8726]" in page, name
        if not allow:
            assert "held-out" in pages["html"] and "Raw personal data is shown" not in pages["html"]

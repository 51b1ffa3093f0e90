"""Detectors, normalisation, keys and the search kernel: fast tests without Spark.

``FIXTURE`` is a labelled set of short texts (positives, formatting variants, checksum
failures, look-alikes); ``test_precision_recall_per_detector`` prints each detector's
precision and recall on it and asserts a floor.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from extraction_audit.config import parse_config
from extraction_audit.errors import UserFacingError
from extraction_audit.pii import normalise as norm
from extraction_audit.pii.detectors import DetectionSettings, DetectorSet, card_brand_ok, is_valid_nino, mod11_is_valid
from extraction_audit.pii.keys import key_fingerprint, resolve_hmac_key, value_key
from extraction_audit.pii.search import FormSearcher, trie_regex


def settings_for(**pii) -> DetectionSettings:
    return DetectionSettings.from_config(parse_config({"pii": {"hmac_key": "k", **pii}}))


def detect(text: str, **pii) -> list[tuple[str, str, str]]:
    """(entity_type, surface, normalised) found in ``text``."""
    return [(d.entity_type, d.surface, d.normalised) for d in DetectorSet(settings_for(**pii)).detect(text)]


def only(entity_type: str, text: str, **pii) -> list[tuple[str, str]]:
    return [(s, n) for t, s, n in detect(text, **pii) if t == entity_type]


# -- per-detector positive / negative cases ---------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("Write to Jane.Doe+news@Example.co.uk today.", [("Jane.Doe+news@Example.co.uk", "jane.doe+news@example.co.uk")]),
    ("cc: x_y@z.org, a.b@c.io.", [("x_y@z.org", "x_y@z.org"), ("a.b@c.io", "a.b@c.io")]),
    ("user@localhost and @handle and support at example dot com", []),
])
def test_email(text, expected):
    assert only("email", text) == expected


@pytest.mark.parametrize("text, expected", [
    ("Call +44 20 7946 0958 now", [("+44 20 7946 0958", "+442079460958")]),
    ("Call 020 7946 0958 now", [("020 7946 0958", "+442079460958")]),  # GB national format
    ("or (212) 555-0142.", [("(212) 555-0142", "+12125550142")]),
    ("or 212-555-0142.", [("212-555-0142", "+12125550142")]),
    ("order 12345, ISBN 978-3-16-148410-0, years 1990-2005", []),
    ("ring 020 7946 095", []),  # too short
])
def test_phone(text, expected):
    assert only("phone", text) == expected


def test_phone_regions_are_configurable():
    assert only("phone", "call 06 12 34 56 78", phone_regions=["GB"]) == []
    assert only("phone", "call 06 12 34 56 78", phone_regions=["FR"]) == [("06 12 34 56 78", "+33612345678")]
    with pytest.raises(UserFacingError, match="pii.phone_regions"):
        settings_for(phone_regions=["XX"])


@pytest.mark.parametrize("text, expected", [
    ("card 4111 1111 1111 1111 exp", ["4111111111111111"]),
    ("card 4111-1111-1111-1111.", ["4111111111111111"]),
    ("card 4111111111111111", ["4111111111111111"]),
    ("amex 3782 822463 10005", ["378282246310005"]),
    ("mc 5500 0000 0000 0004 and discover 6011 1111 1111 1117", ["5500000000000004", "6011111111111117"]),
    ("card 4111 1111 1111 1111 2024", ["4111111111111111"]),  # trailing year is not part of it
    ("bad 4111 1111 1111 1112", []),   # Luhn failure
    ("id 1234 5678 9012 3452", []),    # Luhn-valid but no card brand starts with 1
    ("code 79927398713", []),          # Luhn-valid, too short, no brand
])
def test_card(text, expected):
    assert [n for _, n in only("card", text)] == expected


def test_card_brand_table():
    assert card_brand_ok("4111111111111111") and card_brand_ok("378282246310005")
    assert not card_brand_ok("1234567890123452") and not card_brand_ok("41111111111111")


@pytest.mark.parametrize("text, expected", [
    ("IBAN GB82 WEST 1234 5698 7654 32 TO ME", ["GB82WEST12345698765432"]),
    ("iban DE89370400440532013000.", ["DE89370400440532013000"]),
    ("FR14 2004 1010 0505 0001 3M02 606", ["FR1420041010050500013M02606"]),
    ("IBAN GB82 WEST 1234 5698 7654 33", []),  # mod-97 failure
    ("GB82 WEST", []),
])
def test_iban(text, expected):
    assert [n for _, n in only("iban", text)] == expected


@pytest.mark.parametrize("text, expected", [
    ("sort code 40-47-84, account number 70872490.", ["404784:70872490"]),
    ("Acc 12345678 sort code 20 00 00", ["200000:12345678"]),
    ("Sort code 404784 a/c 70872490", ["404784:70872490"]),
    ("sort code 40-47-84 only", []),
    ("on 12-05-20 we sold 12345678 units", []),  # no banking cue
])
def test_uk_bank_account(text, expected):
    assert [n for _, n in only("uk_bank_account", text)] == expected


@pytest.mark.parametrize("text, expected", [
    ("SSN 536-90-4399.", ["536904399"]),
    ("SSN: 536904399", ["536904399"]),
    ("ssn 536 90 4399", ["536904399"]),
    ("number 536904399", []),          # bare 9 digits need a cue
    ("SSN 666-12-3456", []),           # invalid area
    ("SSN 078-05-1120", []),           # blacklisted
    ("SSN 900-12-3456", []),           # 9xx not issued
    ("SSN 536-00-4399", []),           # zero group
])
def test_us_ssn(text, expected):
    assert [n for _, n in only("us_ssn", text)] == expected


@pytest.mark.parametrize("text, expected", [
    ("number 943 476 5870", ["9434765870"]),
    ("NHS no: 9434765870", ["9434765870"]),
    ("NHS: 943-476-5870", ["9434765870"]),
    ("number 943 476 5871", []),       # mod-11 failure
    ("Ref 4505577104 on the parcel", []),  # valid checksum, no cue, not in NHS layout
])
def test_nhs_number(text, expected):
    assert [n for _, n in only("nhs_number", text)] == expected


@pytest.mark.parametrize("text, expected", [
    ("NINO AB 12 34 56 C", ["AB123456C"]),
    ("nino ab123456c", ["AB123456C"]),
    ("NI: JG103759A", ["JG103759A"]),
    ("BG123456A GB123456A NK123456B", []),   # disallowed prefixes
    ("AB123456E", []),                       # suffix must be A-D
    ("DA123456A QQ123456C AO123456B", []),   # D/Q first letters, O second letter
    ("Ab123456C", []),                       # mixed case
])
def test_uk_nino(text, expected):
    assert [n for _, n in only("uk_nino", text)] == expected
    assert is_valid_nino("JG 10 37 59 A") and not is_valid_nino("TN123456A")


@pytest.mark.parametrize("text, expected", [
    ("DOB: 12/03/1985", ["1985-03-12"]),
    ("was born on 3rd March 1972.", ["1972-03-03"]),
    ("Date of birth: 1990-07-15", ["1990-07-15"]),
    ("birthday is July 4, 1980", ["1980-07-04"]),
    ("d.o.b. 04.11.67", ["1967-11-04"]),
    ("DOB 13/25/1985", []),            # no such date either way round
    ("DOB: 31/02/1985", []),           # 31 February
    ("meeting on 12/03/1985", []),     # no birth context
    ("born in 1985", []),              # year only
])
def test_date_of_birth(text, expected):
    assert [n for _, n in only("date_of_birth", text)] == expected


def test_date_of_birth_month_first():
    assert [n for _, n in only("date_of_birth", "DOB: 03/12/1985", date_day_first=False)] == ["1985-03-12"]
    assert [n for _, n in only("date_of_birth", "DOB: 25/12/1985", date_day_first=False)] == ["1985-12-25"]


@pytest.mark.parametrize("text, expected", [
    ("from 81.2.69.160.", ["81.2.69.160"]),
    ("v6 2001:0db8:0000:0000:0000:ff00:0042:8329 seen", ["2001:db8::ff00:42:8329"]),
    ("and 2001:db8::1", ["2001:db8::1"]),
    ("999.1.1.1 and 1.2.3 and 01.02.03.04", []),
    ("version 1.2.3.4 released", []),
    ("at 12:30:45", []),
])
def test_ip_address(text, expected):
    assert [n for _, n in only("ip_address", text)] == expected


# -- custom entity types ------------------------------------------------------------------

def luhn_ok_last4(value: str) -> bool:  # used through a dotted path
    return value.endswith("4")


def test_custom_types_with_validators():
    custom = [
        {"name": "customer_id", "pattern": r"\bCUST-\d{6}\b"},
        {"name": "member_no", "pattern": r"\bM(\d{11})\b", "validator": "luhn", "value_group": 1},
        {"name": "patient_ref", "pattern": r"\bPR\d{10}\b", "validator": "mod11"},
        {"name": "ticket", "pattern": r"\btk-\d+\b", "validator": f"{__name__}.luhn_ok_last4", "ignore_case": True},
    ]
    text = "CUST-123456 M79927398713 M79927398714 PR9434765870 PR9434765871 TK-1234 tk-1235 cust-123456"
    found = [(t, s, n) for t, s, n in detect(text, custom=custom, detectors=[])]
    assert found == [
        ("customer_id", "CUST-123456", "CUST-123456"),
        ("member_no", "79927398713", "79927398713"),
        ("patient_ref", "PR9434765870", "PR9434765870"),
        ("ticket", "TK-1234", "TK-1234"),
    ]
    assert mod11_is_valid("9434765870") and not mod11_is_valid("9434765871")


def test_custom_and_detector_config_errors():
    with pytest.raises(UserFacingError, match=r"pii.custom\[0\].validator"):
        settings_for(custom=[{"name": "x_id", "pattern": "X", "validator": "no.such.module.fn"}])
    with pytest.raises(UserFacingError, match="pii.detectors"):
        settings_for(detectors=["email", "passport"])
    with pytest.raises(UserFacingError, match="clash"):
        settings_for(custom=[{"name": "email", "pattern": "X"}])


def test_overlaps_resolve_to_the_most_specific_detector():
    # A Luhn-valid 16-digit card is not also reported as a phone; the IBAN is not split.
    found = detect("card 4111 1111 1111 1111, IBAN GB82 WEST 1234 5698 7654 32, NHS 943 476 5870")
    assert [t for t, _, _ in found] == ["card", "iban", "nhs_number"]


# -- normalisation, redaction, keys ------------------------------------------------------------

def test_redaction_keeps_type_and_hint_only():
    assert norm.redact("email", "john.doe@example.com") == "j***@e***.com"
    assert norm.redact("card", "4111111111111111") == "**** **** **** 1111"
    assert norm.redact("phone", "+442079460958") == "+44********58"
    assert norm.redact("iban", "GB82WEST12345698765432") == "GB" + "*" * 16 + "5432"
    assert norm.redact("us_ssn", "536904399") == "***-**-4399"
    assert norm.redact("person_name", "jane smith") == "J*** S***"
    assert norm.redact("date_of_birth", "1985-03-12") == "1985-**-**"
    assert norm.redact("ip_address", "81.2.69.160") == "81.2.*.*"
    assert norm.redact("customer_id", "CUST-123456") == "*********56"


def test_name_normalisation():
    assert norm.normalise_name("Dr. José  O'Neil") == "jose o'neil"
    assert norm.normalise_name("MRS Jane SMITH") == "jane smith"


def test_value_key_is_keyed_and_typed():
    k = value_key(b"secret", "phone", "+442079460958")
    assert re.fullmatch(r"[0-9a-f]{64}", k)
    assert k == value_key(b"secret", "phone", "+442079460958")
    assert k != value_key(b"other", "phone", "+442079460958")
    assert k != value_key(b"secret", "card", "+442079460958")
    assert key_fingerprint(b"secret") != key_fingerprint(b"other")


def test_missing_key_is_an_error_naming_both_settings(monkeypatch):
    cfg = parse_config({"pii": {"hmac_key_env": "EA_TEST_NO_SUCH_KEY"}})
    monkeypatch.delenv("EA_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(UserFacingError, match=r"EA_TEST_NO_SUCH_KEY.*pii.hmac_key"):
        resolve_hmac_key(cfg.pii)
    monkeypatch.setenv("EA_TEST_NO_SUCH_KEY", "from-env")
    assert resolve_hmac_key(cfg.pii) == b"from-env"


def test_fingerprint_tracks_settings_and_key():
    base = settings_for()
    assert base.fingerprint() == settings_for().fingerprint()
    assert base.fingerprint() != settings_for(phone_regions=["GB"]).fingerprint()
    assert base.fingerprint() != DetectionSettings.from_config(
        parse_config({"pii": {"hmac_key": "k2"}})).fingerprint()


# -- second-chance search kernel ----------------------------------------------------------------

def test_trie_regex_prefers_longest():
    rx = re.compile(trie_regex(["ab", "abc", "x"]))
    assert rx.match("abcd").group() == "abc" and rx.match("abd").group() == "ab"


def test_form_searcher_formats_and_boundaries():
    values = [
        ("card", "k-card", norm.search_requirements("card", "4111111111111111", "4111 1111 1111 1111")),
        ("phone", "k-phone", norm.search_requirements("phone", "+442079460958", "+44 20 7946 0958")),
        ("uk_bank_account", "k-acct", norm.search_requirements("uk_bank_account", "404784:70872490", "")),
        ("person_name", "k-js", norm.search_requirements("person_name", "jane smith", "Jane Smith")),
        ("person_name", "k-j", norm.search_requirements("person_name", "jane", "Jane")),
        ("customer_id", "k-cust", norm.search_requirements("customer_id", "CUST-004217", "CUST-004217")),
    ]
    searcher = FormSearcher(values)

    def keys(text):
        return sorted(searcher.values[i][1] for i in searcher.values_in(text))

    assert keys("paid 4111-1111-1111-1111 ok") == ["k-card"]
    assert keys("paid 41111111111111112") == []                 # embedded in a longer number
    assert keys("ring (020) 7946-0958!") == ["k-phone"]
    assert keys("sort code 40 47 84, acct 70872490") == ["k-acct"]
    assert keys("sort code 40 47 84 only") == []                # both parts are required
    assert keys("JANE SMITH wrote") == ["k-j", "k-js"]         # a shorter form at the same start
    assert keys("Smith, Jane") == ["k-j", "k-js"]
    assert keys("janes") == []
    assert keys("ref cust-004217.") == ["k-cust"]


# -- precision / recall on the labelled fixture ---------------------------------------------

FIXTURE: list[tuple[str, list[tuple[str, str]]]] = [
    ("Write to Jane.Doe+news@Example.co.uk or ring 020 7946 0958.",
     [("email", "Jane.Doe+news@Example.co.uk"), ("phone", "020 7946 0958")]),
    ("US office: (212) 555-0142, fax 212-555-0199.", [("phone", "(212) 555-0142"), ("phone", "212-555-0199")]),
    ("Intl +44 161 496 0123 or +1 415 555 2671.", [("phone", "+44 161 496 0123"), ("phone", "+1 415 555 2671")]),
    ("Order 12345 shipped; ISBN 978-3-16-148410-0; 1990-2005 archive.", []),
    ("Mobile 07700 900123 (Ofcom drama range).", [("phone", "07700 900123")]),
    ("Card 4111 1111 1111 1111 exp 12/27.", [("card", "4111 1111 1111 1111")]),
    ("Card 4111-1111-1111-1112 was rejected.", []),
    ("Amex 3782 822463 10005 and MC 5500000000000004.", [("card", "3782 822463 10005"), ("card", "5500000000000004")]),
    ("Tracking 1234 5678 9012 3452 arrived.", []),
    ("Refund to IBAN GB82 WEST 1234 5698 7654 32 TO settle.", [("iban", "GB82 WEST 1234 5698 7654 32")]),
    ("iban DE89370400440532013000 and GB82WEST12345698765433.", [("iban", "DE89370400440532013000")]),
    ("Paid from sort code 40-47-84, account number 70872490.", [("uk_bank_account", "40-47-84, account number 70872490")]),
    ("On 12-05-20 we sold 12345678 units.", []),
    ("Account 31926819 at sort code 60-16-13 is closed.", [("uk_bank_account", "31926819 at sort code 60-16-13")]),
    ("Claimant SSN 536-90-4399 and spouse SSN: 219099998.", [("us_ssn", "536-90-4399"), ("us_ssn", "219099998")]),
    ("Invoice 536904399 and SSN 666-12-3456.", []),
    ("NHS number 943 476 5870, repeat NHS 943 476 5871.", [("nhs_number", "943 476 5870")]),
    ("Patient NHS no 4010232137 admitted.", [("nhs_number", "4010232137")]),
    ("Parcel ref 4505577104 delivered.", []),
    ("NINO AB 12 34 56 C and QQ 12 34 56 C (example).", [("uk_nino", "AB 12 34 56 C")]),
    ("NI number jg103759a on file; code BG123456A void.", [("uk_nino", "jg103759a")]),
    ("DOB: 12/03/1985; appointment 14/03/2024.", [("date_of_birth", "12/03/1985")]),
    ("She was born on 3rd March 1972 in Leeds.", [("date_of_birth", "3rd March 1972")]),
    ("Date of birth 1990-07-15. Born in 1985? No.", [("date_of_birth", "1990-07-15")]),
    ("Released on 12/03/1985 after review.", []),
    ("Logins from 81.2.69.160 and 2001:db8::ff00:42:8329.", [("ip_address", "81.2.69.160"),
                                                            ("ip_address", "2001:db8::ff00:42:8329")]),
    ("Upgrade to version 1.2.3.4 at 12:30:45; bad 999.1.1.1.", []),
    ("Birthday: July 4, 1980. Email jb@example.org.", [("date_of_birth", "July 4, 1980"), ("email", "jb@example.org")]),
    ("Customer born 1/2/1970, phone 0113 496 0456.", [("date_of_birth", "1/2/1970"), ("phone", "0113 496 0456")]),
    ("Server 10.0.0.1 and card 6011 1111 1111 1117.", [("ip_address", "10.0.0.1"), ("card", "6011 1111 1111 1117")]),
]
DETECTOR_TYPES = ["email", "phone", "card", "iban", "uk_bank_account", "us_ssn", "nhs_number", "uk_nino",
                  "date_of_birth", "ip_address"]


def precision_recall(fixture, predict) -> dict[str, tuple[int, int, int]]:
    """entity_type -> (true positives, false positives, false negatives), exact spans."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for text, gold in fixture:
        predicted = set(predict(text))
        gold_set = set(gold)
        for t, s in predicted & gold_set:
            counts[t][0] += 1
        for t, s in predicted - gold_set:
            counts[t][1] += 1
        for t, s in gold_set - predicted:
            counts[t][2] += 1
    return {t: tuple(v) for t, v in counts.items()}


def format_table(counts: dict[str, tuple[int, int, int]]) -> str:
    lines = [f"{'detector':<16} {'tp':>3} {'fp':>3} {'fn':>3} {'precision':>9} {'recall':>6}"]
    for t, (tp, fp, fn) in sorted(counts.items()):
        p = tp / (tp + fp) if tp + fp else 1.0
        r = tp / (tp + fn) if tp + fn else 1.0
        lines.append(f"{t:<16} {tp:>3} {fp:>3} {fn:>3} {p:>9.2f} {r:>6.2f}")
    return "\n".join(lines)


def test_precision_recall_per_detector():
    detectors = DetectorSet(settings_for(detectors=DETECTOR_TYPES))
    counts = precision_recall(FIXTURE, lambda text: [(d.entity_type, d.surface) for d in detectors.detect(text)])
    print("\n" + format_table(counts))
    for t in DETECTOR_TYPES:
        tp, fp, fn = counts.get(t, (0, 0, 0))
        assert tp > 0, t
        assert tp / (tp + fp) >= 0.9, (t, counts[t])
        assert tp / (tp + fn) >= 0.75, (t, counts[t])

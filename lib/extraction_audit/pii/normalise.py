"""Canonical forms, redaction hints and corpus-search surface forms for personal data.

One canonical form per value is what makes a finding joinable: ``+44 20 7946 0958`` in a
sample and ``020 7946 0958`` in the corpus are the same phone only once both are E.164.
``value_key`` hashes the canonical form (``keys.py``); ``redact`` gives analysts a hint of
the type and shape without the value; ``search_requirements`` lists the ways the value may
be written in a document, for the second-chance corpus search.  Pure functions, no Spark.

Reads and writes no tables.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date

_NON_DIGIT = re.compile(r"\D+")
_SPACES = re.compile(r"\s+")
_TITLES = {"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "dame", "lady", "lord", "rev"}
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december"]


def digits(text: str) -> str:
    return _NON_DIGIT.sub("", text)


def normalise_email(text: str) -> str:
    return text.strip().lower()


def normalise_name(text: str) -> str:
    """``Dr. José  O'Neil`` -> ``jose o'neil``: accents, case, titles and spacing removed."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    plain = re.sub(r"[^\w\s'\-]", " ", plain).replace("_", " ")
    words = [w.strip("'-") for w in plain.split()]
    while words and words[0] in _TITLES:
        words = words[1:]
    return " ".join(w for w in words if w)


def normalise_compact_upper(text: str) -> str:
    """IBAN, NINO and similar: separators dropped, upper case."""
    return re.sub(r"[\s\-.]", "", text).upper()


# -- redaction -------------------------------------------------------------------------

def _mask(text: str, keep_last: int) -> str:
    keep = text[-keep_last:] if keep_last else ""
    return "*" * max(len(text) - keep_last, 0) + keep


def redact(entity_type: str, normalised: str) -> str:
    """A hint that keeps the type and shape but not the value (``j***@e***.com``)."""
    if entity_type == "email":
        local, _, domain = normalised.partition("@")
        host, _, tld = domain.rpartition(".")
        return f"{local[:1]}***@{host[:1]}***.{tld}" if host else f"{local[:1]}***@***"
    if entity_type == "phone":
        import phonenumbers

        try:
            cc = f"+{phonenumbers.parse(normalised).country_code}"
        except phonenumbers.NumberParseException:
            cc = "+"
        return cc + _mask(normalised[len(cc):], 2)
    if entity_type == "card":
        return "**** **** **** " + normalised[-4:]
    if entity_type == "iban":
        return normalised[:2] + _mask(normalised[2:], 4)
    if entity_type == "uk_bank_account":  # "sort:account", or the account alone
        sort_code, colon, account = normalised.rpartition(":")
        return ("**-**-** " if colon else "") + _mask(account, 2)
    if entity_type == "us_ssn":
        return "***-**-" + normalised[-4:]
    if entity_type == "nhs_number":
        return "*** *** **" + normalised[-2:]
    if entity_type == "uk_nino":
        return normalised[:2] + " ** ** ** *"
    if entity_type == "date_of_birth":
        return normalised[:4] + "-**-**"
    if entity_type == "ip_address":
        if ":" in normalised:
            return normalised.split(":")[0] + ":****"
        return ".".join(normalised.split(".")[:2]) + ".*.*"
    if entity_type == "person_name":
        return " ".join(w[:1].upper() + "***" for w in normalised.split())
    return _mask(normalised, 2)  # custom types


# -- surface forms for the second-chance corpus search -----------------------------------

def _phone_forms(e164: str) -> list[str]:
    import phonenumbers
    from phonenumbers import PhoneNumberFormat as Fmt

    try:
        number = phonenumbers.parse(e164)
    except phonenumbers.NumberParseException:
        return [e164]
    national = phonenumbers.format_number(number, Fmt.NATIONAL)
    international = phonenumbers.format_number(number, Fmt.INTERNATIONAL)
    return [e164, e164[1:], digits(national), national, international]


def _date_forms(iso: str, day_first: bool) -> list[str]:
    y, m, d = (int(p) for p in iso.split("-"))
    month = MONTHS[m - 1]
    forms = [iso, f"{d} {month} {y}", f"{d}{_ordinal(d)} {month} {y}", f"{month} {d}, {y}",
             f"{month} {d} {y}", f"{d} {month[:3]} {y}", f"{month[:3]} {d}, {y}"]
    for sep in "/.-":
        if day_first:
            forms += [f"{d:02d}{sep}{m:02d}{sep}{y}", f"{d}{sep}{m}{sep}{y}"]
        else:
            forms += [f"{m:02d}{sep}{d:02d}{sep}{y}", f"{m}{sep}{d}{sep}{y}"]
    return forms


def _ordinal(d: int) -> str:
    return "th" if 11 <= d % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(d % 10, "th")


def search_requirements(entity_type: str, normalised: str, surface: str,
                        day_first: bool = True) -> list[list[str]]:
    """Ways the value can be written in a corpus document, lower-cased.

    A document holds the value when, for every requirement (inner list), at least one of
    its variants occurs.  Digit-based forms are also matched against a copy of the text
    with separators between digits removed (``search.py``), so ``4111 1111 ...`` and
    ``4111-1111-...`` need no listing of their own.
    """
    surface = _SPACES.sub(" ", surface.strip()).lower()
    n = normalised.lower()
    if entity_type == "phone":
        forms = _phone_forms(normalised)
    elif entity_type in ("card", "nhs_number", "us_ssn"):
        forms = [n]
    elif entity_type == "uk_bank_account":
        sort_code, colon, account = n.rpartition(":")
        if not colon:  # an account number found without its sort code
            return [list(dict.fromkeys([account, surface]))]
        dashed = "-".join(sort_code[i:i + 2] for i in (0, 2, 4))
        return [[sort_code, dashed, dashed.replace("-", " ")], [account]]
    elif entity_type == "iban":
        forms = [n, " ".join(n[i:i + 4] for i in range(0, len(n), 4))]
    elif entity_type == "uk_nino":
        forms = [n, f"{n[:2]} {n[2:4]} {n[4:6]} {n[6:8]} {n[8:]}", f"{n[:2]} {n[2:8]} {n[8:]}"]
    elif entity_type == "date_of_birth":
        forms = _date_forms(normalised, day_first)
    elif entity_type == "person_name":
        words = n.split()
        forms = [n] + ([f"{words[-1]}, {' '.join(words[:-1])}"] if len(words) > 1 else [])
    else:  # email, ip_address, custom types
        forms = [n]
    variants = [f.lower() for f in dict.fromkeys([*forms, surface]) if f]
    return [variants]


def iso_date(year: int, month: int, day: int) -> str | None:
    """ISO date, or None when the parts do not form a plausible date of birth."""
    if year < 100:
        year += 1900 if year > date.today().year % 100 else 2000
    try:
        value = date(year, month, day)
    except ValueError:
        return None
    if not 1900 <= value.year <= date.today().year:
        return None
    return value.isoformat()

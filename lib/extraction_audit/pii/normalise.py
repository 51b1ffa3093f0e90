"""Canonical forms, redaction hints and corpus-search surface forms for personal data.

One canonical form per value is what makes a finding joinable: ``+44 20 7946 0958`` in a
sample and ``020 7946 0958`` in the corpus are the same phone only once both are E.164.
``value_key`` hashes the canonical form (``keys.py``); ``redact`` gives analysts a hint of
the type and shape without the value; ``search_requirements`` lists the ways the value may
be written in a document, for the by-value corpus count.  Pure functions, no Spark.

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


# -- surface forms for the by-value corpus count ------------------------------------------
#
# A value's surface forms are tagged with the view of a document they are matched in
# (``search.py``):
#
# * ``COMPACT`` ("c:"): upper case, every run of separators (whitespace, dashes, dots,
#   slashes, brackets) between two letters/digits dropped.  A form matches when it is the
#   concatenation of whole consecutive letter/digit runs of the text, so ``020 7946 0958``,
#   ``(020) 7946-0958``, ``020.7946.0958`` and ``+44 (0)20 7946 0958`` all give the digits
#   of one form, and a form never starts or ends inside a run (``14111...`` holds no card
#   ``4111...``).  Numbers, IBANs, NINOs, sort codes.
# * ``PLAIN`` ("p:"): accents removed, lower case, whitespace collapsed; a form matches
#   unless a letter/digit touches it (a digit edge is only blocked by a digit).  Emails,
#   IP addresses, dates, names, custom types.
#
# Forms come from the canonical value only, so every finding of one value searches for the
# same forms whichever way the sample happened to write it.

COMPACT = "c:"
PLAIN = "p:"
_COMPACT_TYPES = ("card", "nhs_number", "us_ssn")


def _phone_forms(e164: str) -> list[str]:
    """Digit strings of a phone: national (``02079460958``), international with the country
    code (``442079460958``: ``+44 20 ...``), with ``00`` (``0044 20 ...``), and with the trunk
    prefix kept after the country code (``+44 (0)20 ...``)."""
    import phonenumbers
    from phonenumbers import PhoneNumberFormat as Fmt

    try:
        number = phonenumbers.parse(e164)
    except phonenumbers.NumberParseException:
        return [digits(e164)]
    cc = str(number.country_code)
    nsn = phonenumbers.national_significant_number(number)
    national = digits(phonenumbers.format_number(number, Fmt.NATIONAL))
    forms = [national, cc + nsn, "00" + cc + nsn]
    if national != nsn and national.endswith(nsn):
        trunk = national[: len(national) - len(nsn)]
        forms += [cc + trunk + nsn, "00" + cc + trunk + nsn]
    return forms


def _date_forms(iso: str, day_first: bool) -> list[str]:
    y, m, d = (int(p) for p in iso.split("-"))
    month = MONTHS[m - 1]
    o = _ordinal(d)
    forms = [iso, f"{d} {month} {y}", f"{d}{o} {month} {y}", f"{d} {month}, {y}", f"{d}{o} of {month} {y}",
             f"{month} {d}, {y}", f"{month} {d} {y}", f"{month} {d}{o}, {y}", f"{month} {d}{o} {y}"]
    for name in {month[:3], month[:4] if month.startswith("sept") else month[:3]}:
        forms += [f"{d} {name} {y}", f"{d}{o} {name} {y}", f"{name} {d}, {y}", f"{name} {d} {y}",
                  f"{d} {name}. {y}", f"{name}. {d}, {y}"]
    orders = [(d, m) if day_first else (m, d)]
    if d > 12:  # unambiguous the other way round too: the detector reads 11/17/1936 month first
        orders.append((m, d) if day_first else (d, m))
    for first, second in orders:
        for sep in "/.-":
            for yy in (str(y), f"{y % 100:02d}"):
                forms += [f"{first:02d}{sep}{second:02d}{sep}{yy}", f"{first}{sep}{second}{sep}{yy}"]
    return forms


def _ordinal(d: int) -> str:
    return "th" if 11 <= d % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(d % 10, "th")


def plain_text(text: str) -> str:
    """The PLAIN view of a text: accents removed, lower case, whitespace runs as one space."""
    if not text.isascii():
        decomposed = unicodedata.normalize("NFKD", text)
        text = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _SPACES.sub(" ", text.lower())


def search_requirements(entity_type: str, normalised: str, surface: str = "",
                        day_first: bool = True) -> list[list[str]]:
    """The forms a corpus document must hold for the value, each prefixed with its view.

    A document holds the value when, for every requirement (inner list), at least one of
    its forms occurs.  Only a sort code with its account has two requirements.  ``surface``
    is accepted for compatibility and ignored: forms depend on the canonical value alone.
    """
    n = normalised
    if entity_type == "phone":
        return [[COMPACT + f for f in dict.fromkeys(_phone_forms(n)) if f]]
    if entity_type in _COMPACT_TYPES:
        return [[COMPACT + digits(n)]]
    if entity_type == "uk_bank_account":
        sort_code, colon, account = n.rpartition(":")
        if not colon:  # an account number found without its sort code
            return [[COMPACT + account]]
        return [[COMPACT + sort_code], [COMPACT + account]]
    if entity_type in ("iban", "uk_nino"):
        return [[COMPACT + normalise_compact_upper(n)]]
    if entity_type == "date_of_birth":
        forms = _date_forms(n, day_first)
    elif entity_type == "person_name":
        words = n.split()
        forms = [n] + ([f"{words[-1]}, {' '.join(words[:-1])}"] if len(words) > 1 else [])
    elif entity_type == "ip_address":
        import ipaddress

        ip = ipaddress.ip_address(n)
        forms = [n] + ([ip.exploded] if ip.version == 6 else [])
    else:  # email, custom types
        forms = [n]
    return [[PLAIN + f for f in dict.fromkeys(plain_text(f).strip() for f in forms) if f]]


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

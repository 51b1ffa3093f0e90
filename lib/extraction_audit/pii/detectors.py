"""Personal-data detectors, registered by name and chosen in ``pii.detectors``.

Each detector finds character spans of one entity type and returns the canonical value
(``normalise.py``).  Checksummed identifiers are validated with python-stdnum and phones
with phonenumbers, never by a home-made regex alone:

======================  =========================================================================
name                    what counts as a finding
======================  =========================================================================
email                   RFC-like address; value lower-cased
phone                   ``phonenumbers.PhoneNumberMatcher`` for every region in ``pii.phone_regions``:
                        VALID numbers, and UK-mobile-shaped ones (07xxx xxxxxx); the nearest label
                        before it decides (``tel``/``mobile``/``the number is`` keep it; ``NHS``,
                        ``ref``, ``account number`` drop it unless written as only phones are:
                        ``+44``, ``(0113)``, a national ``0``); value E.164
card                    13-19 digits (spaces/dashes allowed) with a card-brand prefix and a valid
                        Luhn check digit (``stdnum.luhn``); value digits only
iban                    ``stdnum.iban`` (country format + mod-97); value compact upper case
uk_bank_account         sort code (``12-34-56``) and 8-digit account number within 40 characters,
                        with ``sort code``/``account``/``a/c`` nearby, value ``sort:account``; or an
                        8-digit number whose nearest label is an account label (``account``, ``a/c``,
                        ``acct no.``, ``(current account)`` after it), value the 8 digits (UK
                        modulus checking needs Vocalink's weight tables, so there is no checksum)
us_ssn                  ``stdnum.us.ssn`` (area/group/serial rules); bare 9 digits only after an
                        ``SSN``/``social security`` cue or before ``(SSN)``; value digits only
nhs_number              ``stdnum.gb.nhs`` mod-11 check digit, written ``943 476 5870`` or after an
                        ``NHS``/``patient``/``health`` cue (or before ``(NHS)``), not part of a longer
                        number or a phone (``+44 (0)117 496 0175``); value 10 digits
uk_nino                 HMRC format (NIM39110): two prefix letters excluding D, F, I, Q, U, V
                        (second letter not O) and the prefixes BG, GB, KN, NK, NT, TN, ZZ; six
                        digits; suffix A-D.  python-stdnum has no NINO module.  Value compact
date_of_birth           a date within 30 characters after a birth cue (``DOB``, ``date of birth``,
                        ``born``, ``birthday``) or just before one (``(date of birth)``); value ISO date; ``pii.date_day_first`` decides
                        03/04/1985
ip_address              IPv4/IPv6 validated by ``ipaddress``; value its compressed form
person_name             the backend chosen by ``pii.name_backend`` (``names.py``); value
                        canonical name
<custom name>           ``pii.custom``: regex plus optional validator (luhn, iban, mod11, or a
                        dotted path to a ``f(str) -> bool``)
======================  =========================================================================

Where two detectors claim overlapping text the more specific wins (``PRIORITY``), so each
character of a sample belongs to at most one finding.

Reads and writes no tables.
"""

from __future__ import annotations

import hashlib
import importlib
import ipaddress
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterable, NamedTuple

from ..config import AuditConfig
from ..errors import UserFacingError
from . import normalise as norm
from .keys import key_fingerprint, resolve_hmac_key
from .names import check_name_backend, get_name_backend

DETECTOR_VERSION = "2"  # bump when a detector changes what it finds: the corpus index is rescanned


class Detection(NamedTuple):
    entity_type: str
    start: int
    end: int
    surface: str
    normalised: str
    detector: str


@dataclass(frozen=True)
class DetectionSettings:
    """Everything a worker needs to detect and key values; picklable into Spark closures."""

    detectors: tuple[str, ...]
    phone_regions: tuple[str, ...]
    name_backend: str
    name_model_path: str | None
    name_min_score: float
    custom: tuple[tuple[tuple[str, object], ...], ...]
    date_day_first: bool
    link_window_chars: int
    key: bytes = field(repr=False)

    @classmethod
    def from_config(cls, cfg: AuditConfig) -> "DetectionSettings":
        """Validated settings; raises UserFacingError naming the setting at fault."""
        pii = cfg.pii
        settings = cls(
            detectors=tuple(pii.detectors), phone_regions=tuple(r.upper() for r in pii.phone_regions),
            name_backend=pii.name_backend,
            name_model_path=cfg.resolve(pii.name_model_path) if pii.name_backend == "hf" else pii.name_model_path,
            name_min_score=pii.name_min_score,
            custom=tuple(tuple(sorted(c.model_dump().items())) for c in pii.custom),
            date_day_first=pii.date_day_first, link_window_chars=pii.link_window_chars,
            key=resolve_hmac_key(pii),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        import phonenumbers

        known = set(REGISTRY)
        unknown = [d for d in self.detectors if d not in known]
        if unknown:
            raise UserFacingError(f"pii.detectors: unknown detector(s) {unknown}; known: {sorted(known)} "
                                  f"(user-defined types go in pii.custom)")
        bad_regions = [r for r in self.phone_regions if r not in phonenumbers.SUPPORTED_REGIONS]
        if bad_regions:
            raise UserFacingError(f"pii.phone_regions: unknown region code(s) {bad_regions} (ISO 3166 alpha-2)")
        names = [dict(c)["name"] for c in self.custom]
        clash = sorted({n for n in names if n in known or names.count(n) > 1})
        if clash:
            raise UserFacingError(f"pii.custom: name(s) {clash} repeat or clash with built-in detectors")
        for i, c in enumerate(self.custom):
            _custom_validator(dict(c).get("validator"), f"pii.custom[{i}].validator")
        if "person_name" in self.detectors:
            check_name_backend(self.name_backend, self.name_model_path)

    def fingerprint(self) -> str:
        """Changes whenever detection or keying would give different values."""
        data = {k: v for k, v in self.__dict__.items() if k not in ("key", "link_window_chars")}
        data["key"] = key_fingerprint(self.key)
        data["version"] = DETECTOR_VERSION
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


# -- registry ----------------------------------------------------------------------------

DetectorFactory = Callable[[DetectionSettings], "Detector"]
REGISTRY: dict[str, DetectorFactory] = {}
# Earlier wins an overlap: custom types first (the user asked for them), free text last.
PRIORITY = ["custom", "email", "iban", "card", "uk_bank_account", "nhs_number", "us_ssn", "uk_nino",
            "ip_address", "date_of_birth", "phone", "person_name"]


def register(name: str):
    def wrap(factory):
        REGISTRY[name] = factory
        return factory
    return wrap


class Detector:
    name: str = ""
    entity_type: str = ""

    def detect(self, text: str) -> Iterable[Detection]:  # pragma: no cover - interface
        raise NotImplementedError

    def _hit(self, text: str, start: int, end: int, normalised: str) -> Detection:
        return Detection(self.entity_type, start, end, text[start:end], normalised, self.name)


def _cue_before(text: str, start: int, cue: re.Pattern, window: int) -> bool:
    return cue.search(text, max(0, start - window), start) is not None


def _cue_after(text: str, end: int, cue: re.Pattern, window: int = 6) -> bool:
    """A label written after the value: ``4010232137 (NHS)``, ``07700 900123 (mobile)``."""
    return cue.match(text, end, min(len(text), end + window + 25)) is not None


# Labels that say what a number is.  ``number`` on its own is a phone cue ("the number is",
# "my number's"); with an identifier word before it ("account number", "NHS number") it is
# part of that identifier's label.  Words that are labels only with a number word after
# them ("customer no.", "case number") carry it in the pattern.
_NUMBER_WORD = r"(?:\s*(?:number|no\.?|num|\#)(?![a-z]))?(?:'s)?"
_LABEL = re.compile(
    r"(?i)(?P<account>\b(?:(?:bank|current|savings)\s+)?(?:account|acct|a/c)(?![a-z])" + _NUMBER_WORD + ")"
    r"|(?P<sort>\bsort\s*code|\bs/c(?![a-z]))"
    r"|(?P<other>(?:\b(?:nhs|ssn|ss\#|social\s+security|national\s+insurance|n\.?i|nino|ref(?:erence)?|invoice|"
    r"order|policy|membership|tracking|ticket|iban|card|id|passport|licen[cs]e|serial|sku|model|isbn|flight|"
    r"routing|vat|utr)(?![a-z])|\bre(?=:)|\b(?:customer|member|case|claim|booking|patient|file|reg)"
    r"(?=\s*(?:number|no\.?|num|\#)(?![a-z])))" + _NUMBER_WORD + ")"
    r"|(?P<phone>\b(?:tel(?:ephone)?|phone|call|ring|mobile|cell|fax|contact|text|whatsapp|landline|reach|"
    r"number)(?![a-z])|(?<![\w'])(?-i:[TM])(?=:?\s))")


def nearest_label(text: str, start: int, window: int = 40) -> str | None:
    """The kind of the label nearest before ``start`` (account, sort, other, phone), looking
    back no further than the previous digit: a label already followed by a value labels
    that value, not the next one."""
    lo = max(0, start - window)
    for i in range(start - 1, lo - 1, -1):
        if text[i].isdigit():
            lo = i + 1
            break
    kind = None
    for m in _LABEL.finditer(text, lo, start):
        kind = m.lastgroup
    return kind


# -- simple patterns -------------------------------------------------------------------------

@register("email")
class EmailDetector(Detector):
    name = entity_type = "email"
    _RE = re.compile(r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                     r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![\w@])")

    def __init__(self, settings: DetectionSettings):
        pass

    def detect(self, text):
        for m in self._RE.finditer(text):
            yield self._hit(text, m.start(), m.end(), norm.normalise_email(m.group()))


@register("phone")
class PhoneDetector(Detector):
    """Phones for the configured regions.

    A number is a phone when phonenumbers calls it VALID, or when it is shaped like a UK
    mobile (07xxx xxxxxx, +44 7xxx: phonenumbers rejects unallocated blocks such as Ofcom's
    07700 900xxx drama range, which people still write as their number).  The label nearest
    before it decides what it is: a phone label (``tel``, ``mobile``, ``the number is``) keeps
    it; another identifier's label (``NHS``, ``ref``, ``account number``...) drops it unless the
    number is written the way only phones are (``+44``, ``(0113)``, a national ``0`` prefix);
    unlabelled, a bare digit run (``7192892211``) is kept only when it starts like a phone.
    """

    name = entity_type = "phone"
    _PHONE_AFTER = re.compile(r"(?i)[ \t(\[-]*(?:mobile|tel|phone|landline|home number|work number|cell)\b")
    _UK_MOBILE = re.compile(r"^(?:\+44\s?(?:\(0\)\s?)?|0)7\d{3}\s?\d{3}\s?\d{3}$")

    def __init__(self, settings: DetectionSettings):
        self.regions = settings.phone_regions

    @staticmethod
    def _phone_shaped(raw: str) -> bool:
        return raw[:1] in "+(0" or re.match(r"1[-. ]", raw) is not None

    def _keep(self, text: str, start: int, end: int, valid: bool) -> bool:
        raw = text[start:end]
        if start and (text[start - 1] in "#/-" and start > 1 and text[start - 2].isalnum() or text[start - 1].isalnum()):
            return False  # inside a code: HC-6509614458, NHS#6425963883
        plausible = valid or ("GB" in self.regions and self._UK_MOBILE.match(raw) is not None)
        if not plausible:
            return False
        label = nearest_label(text, start)
        if label == "phone" or _cue_after(text, end, self._PHONE_AFTER):
            return True
        if label is not None:
            return self._phone_shaped(raw)
        return self._phone_shaped(raw) or not re.fullmatch(r"\d+", raw)

    def detect(self, text):
        import phonenumbers

        seen = set()
        for region in self.regions:
            for leniency in (phonenumbers.Leniency.VALID, phonenumbers.Leniency.POSSIBLE):
                for m in phonenumbers.PhoneNumberMatcher(text, region, leniency=leniency):
                    if any(m.start < e and s < m.end for s, e in seen):
                        continue
                    valid = phonenumbers.is_valid_number(m.number)
                    if not self._keep(text, m.start, m.end, valid):
                        continue
                    seen.add((m.start, m.end))
                    e164 = phonenumbers.format_number(m.number, phonenumbers.PhoneNumberFormat.E164)
                    yield self._hit(text, m.start, m.end, e164)


# -- digit groups (cards, NHS numbers, SSNs) ----------------------------------------------

_DIGIT_RUN = re.compile(r"(?<![\w-])\d+(?:[ -]\d+)*(?![\w]|-\d)")


def _group_windows(text: str, min_digits: int, max_digits: int):
    """Contiguous windows of digit groups (single space/dash separators) with their digit
    count, longest first, so ``4111 1111 1111 1111 2024`` still yields the card."""
    for run in _DIGIT_RUN.finditer(text):
        groups = [(m.start() + run.start(), m.end() + run.start()) for m in re.finditer(r"\d+", run.group())]
        windows = []
        for i in range(len(groups)):
            total = 0
            for j in range(i, len(groups)):
                total += groups[j][1] - groups[j][0]
                if total > max_digits:
                    break
                if total >= min_digits:
                    windows.append((groups[i][0], groups[j][1], [e - s for s, e in groups[i:j + 1]]))
        windows.sort(key=lambda w: (w[0] - w[1], w[0]))
        yield windows


def _whole_run(text: str, start: int, end: int) -> bool:
    """The window is a number on its own: not part of a longer digit run, no ``+`` prefix."""
    before = text[:start].rstrip(" -")
    after = text[end:].lstrip(" -")
    phone_prefix = before.endswith("(0)") or re.search(r"\+\d{1,3}$", before) is not None
    return not (before[-1:].isdigit() or before[-1:] == "+" or after[:1].isdigit() or phone_prefix)


def _take_valid(windows, is_valid) -> list[tuple[int, int]]:
    taken: list[tuple[int, int]] = []
    for start, end, sizes in windows:
        if any(start < e and s < end for s, e in taken):
            continue
        if is_valid(start, end, sizes):
            taken.append((start, end))
    return taken


_CARD_PREFIXES = (
    (("4",), (13, 16, 19)),                                                        # Visa
    (tuple(str(p) for p in range(51, 56)) + tuple(str(p) for p in range(2221, 2721)), (16,)),  # Mastercard
    (("34", "37"), (15,)),                                                          # Amex
    (("6011", "65") + tuple(str(p) for p in range(644, 650)), (16, 19)),            # Discover
    (("36", "38", "39") + tuple(str(p) for p in range(300, 306)), (14, 16)),        # Diners
    (tuple(str(p) for p in range(3528, 3590)), (16, 19)),                           # JCB
    (("62",), (16, 17, 18, 19)),                                                    # UnionPay
    (("50", "56", "57", "58", "63", "67"), tuple(range(12, 20))),                   # Maestro
)


def card_brand_ok(number: str) -> bool:
    return any(number.startswith(prefixes) and len(number) in lengths for prefixes, lengths in _CARD_PREFIXES)


@register("card")
class CardDetector(Detector):
    name = entity_type = "card"

    def __init__(self, settings: DetectionSettings):
        pass

    def detect(self, text):
        from stdnum import luhn

        def valid(start, end, sizes):
            number = norm.digits(text[start:end])
            return (len(sizes) == 1 or min(sizes) >= 3) and card_brand_ok(number) and luhn.is_valid(number)

        for windows in _group_windows(text, 12, 19):
            for start, end in _take_valid(windows, valid):
                yield self._hit(text, start, end, norm.digits(text[start:end]))


_NHS_CUE = re.compile(r"(?i)\b(?:nhs|patient|health|hospital|chi)\b")
_NHS_AFTER = re.compile(r"(?i)[ \t(\[-]*(?:nhs|chi)\b")


@register("nhs_number")
class NhsNumberDetector(Detector):
    name = entity_type = "nhs_number"

    def __init__(self, settings: DetectionSettings):
        pass

    def detect(self, text):
        from stdnum.gb import nhs

        def valid(start, end, sizes):
            if sizes not in ([10], [3, 3, 4]) or not _whole_run(text, start, end) \
                    or not nhs.is_valid(norm.digits(text[start:end])):
                return False
            canonical_format = sizes == [3, 3, 4] and "-" not in text[start:end]
            return (canonical_format or _cue_before(text, start, _NHS_CUE, 60)
                    or _cue_after(text, end, _NHS_AFTER))

        for windows in _group_windows(text, 10, 10):
            for start, end in _take_valid(windows, valid):
                yield self._hit(text, start, end, norm.digits(text[start:end]))


_SSN_CUE = re.compile(r"(?i)\b(?:ssn|social\s+security(?:\s+(?:number|no\.?))?|ss#)")
_SSN_AFTER = re.compile(r"(?i)[ \t(\[-]*(?:ssn|social\s+security)\b")


@register("us_ssn")
class UsSsnDetector(Detector):
    name = entity_type = "us_ssn"

    def __init__(self, settings: DetectionSettings):
        pass

    def detect(self, text):
        from stdnum.us import ssn

        def valid(start, end, sizes):
            if sizes == [9]:
                if not (_cue_before(text, start, _SSN_CUE, 30) or _cue_after(text, end, _SSN_AFTER)):
                    return False
            elif sizes != [3, 2, 4]:
                return False
            if not _whole_run(text, start, end):
                return False
            return ssn.is_valid(norm.digits(text[start:end]))

        for windows in _group_windows(text, 9, 9):
            for start, end in _take_valid(windows, valid):
                yield self._hit(text, start, end, norm.digits(text[start:end]))


# -- IBAN, UK bank account, NINO ----------------------------------------------------------

@register("iban")
class IbanDetector(Detector):
    name = entity_type = "iban"
    _RE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){10,30}(?![A-Za-z0-9])")

    def __init__(self, settings: DetectionSettings):
        pass

    def detect(self, text):
        from stdnum import iban

        for m in self._RE.finditer(text):
            # Trim trailing space-separated groups until it validates ("... 32 TO" -> "... 32").
            parts = m.group().split(" ")
            for k in range(len(parts), 0, -1):
                candidate = " ".join(parts[:k])
                if len(candidate.replace(" ", "")) >= 14 and iban.is_valid(candidate):
                    yield self._hit(text, m.start(), m.start() + len(candidate),
                                    norm.normalise_compact_upper(candidate))
                    break


_SORT_CODE = re.compile(r"(?<![\d-])(\d{2})([- ])(\d{2})\2(\d{2})(?![\d-])"
                        r"|(?i:sort\s*code|s/c)\s*[:\-]?\s*(?P<compact>\d{6})(?!\d)")
_ACCOUNT = re.compile(r"(?<![\w-])\d{8}(?![\w-])")
_BANK_CUE = re.compile(r"(?i)\b(?:sort\s*code|account|acct|a/c|s/c|bank)")
_ACCOUNT_AFTER = re.compile(r"(?i)[ \t(\[-]*(?:(?:current|savings|bank|joint)\s+)?(?:account|acct|a/c)\b")


def _sort_codes(text: str) -> list[tuple[int, int, str]]:
    """Sort-code candidates; the digits of a spaced NINO (``AB 12 34 56 C``) are not one."""
    found = []
    for m in _SORT_CODE.finditer(text):
        start, end = m.span("compact") if m.group("compact") else m.span()
        if re.search(r"(?<![A-Za-z])[A-Za-z]{2} $", text[max(0, start - 4):start]) \
                and re.match(r" [A-Da-d](?![A-Za-z0-9])", text[end:end + 3]):
            continue
        found.append((start, end, norm.digits(text[start:end])))
    return found


@register("uk_bank_account")
class UkBankAccountDetector(Detector):
    """A sort code with an 8-digit account number near it (a banking word nearby), value
    ``sort:account``; or an 8-digit account number on its own whose nearest label is an
    account label (``account``, ``a/c``, ``acct no.``, ``the account number is``, or
    ``(current account)`` after it), value the 8 digits."""

    name = entity_type = "uk_bank_account"

    def __init__(self, settings: DetectionSettings):
        pass

    def detect(self, text):
        accounts = [(m.start(), m.end()) for m in _ACCOUNT.finditer(text)]
        used: set[tuple[int, int]] = set()
        for sc_start, sc_end, sort_digits in _sort_codes(text):
            def gap(a):
                lo, hi = (sc_end, a[0]) if a[0] >= sc_end else (a[1], sc_start)
                between = text[lo:hi]
                return len(between) if 0 <= hi - lo <= 40 and not re.search(r"\d", between) else None
            near = [a for a in accounts if a not in used and gap(a) is not None]
            if not near:
                continue
            acc = min(near, key=gap)
            start, end = min(sc_start, acc[0]), max(sc_end, acc[1])
            if not _BANK_CUE.search(text, max(0, start - 40), end):
                continue
            used.add(acc)
            yield self._hit(text, start, end, f"{sort_digits}:{text[acc[0]:acc[1]]}")
        for acc in accounts:
            if acc in used:
                continue
            if nearest_label(text, acc[0]) == "account" or _cue_after(text, acc[1], _ACCOUNT_AFTER):
                yield self._hit(text, acc[0], acc[1], text[acc[0]:acc[1]])


_NINO = re.compile(r"(?<![A-Za-z0-9])([A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]) ?(\d{2}) ?(\d{2}) ?(\d{2}) ?([A-D])"
                   r"(?![A-Za-z0-9])", re.IGNORECASE)
_NINO_BAD_PREFIXES = {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}


def is_valid_nino(value: str) -> bool:
    """HMRC NINO format rules (there is no check digit)."""
    compact = norm.normalise_compact_upper(value)
    m = _NINO.fullmatch(compact)
    return bool(m) and m.group(1).upper() not in _NINO_BAD_PREFIXES


@register("uk_nino")
class UkNinoDetector(Detector):
    name = entity_type = "uk_nino"

    def __init__(self, settings: DetectionSettings):
        pass

    def detect(self, text):
        for m in _NINO.finditer(text):
            mixed_case = not (m.group().isupper() or m.group().islower())
            if not mixed_case and is_valid_nino(m.group()):
                yield self._hit(text, m.start(), m.end(), norm.normalise_compact_upper(m.group()))


# -- dates of birth, IP addresses ---------------------------------------------------------

_BIRTH_CUE = re.compile(r"(?i)\b(?:d\.?o\.?b\.?|date\s+of\s+birth|birth\s*date|born(?:\s+on)?|birthday)(?![a-z])")
_BIRTH_AFTER = re.compile(r"(?i)[ \t(\[-]*(?:d\.?o\.?b\.?|date\s+of\s+birth|birth\s*date|birthday)(?![a-z])")
_MONTH = r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATE = re.compile(
    r"(?i)(?<!\d)(?:(?P<iy>\d{4})-(?P<im>\d{1,2})-(?P<id>\d{1,2})"
    r"|(?P<a>\d{1,2})(?P<sep>[/.\-])(?P<b>\d{1,2})(?P=sep)(?P<y>\d{4}|\d{2})"
    r"|(?P<d1>\d{1,2})(?:st|nd|rd|th)?\s+" + _MONTH + r",?\s+(?P<y1>\d{4})"
    r"|" + _MONTH.replace("mon>", "mon2>") + r"\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y2>\d{4}))(?!\d)")


def _month_number(name: str) -> int:
    return next(i for i, m in enumerate(norm.MONTHS, 1) if m.startswith(name.lower().rstrip(".")[:3]))


@register("date_of_birth")
class DateOfBirthDetector(Detector):
    name = entity_type = "date_of_birth"

    def __init__(self, settings: DetectionSettings):
        self.day_first = settings.date_day_first

    def detect(self, text):
        taken = set()
        for cue in _BIRTH_CUE.finditer(text):
            m = _DATE.search(text, cue.end(), min(len(text), cue.end() + 30 + 20))
            if not m or m.start() - cue.end() > 30:
                continue
            iso = self._iso(m)
            if iso and m.start() not in taken:
                taken.add(m.start())
                yield self._hit(text, m.start(), m.end(), iso)
        for m in _DATE.finditer(text):  # the label after the date: "12/03/1985 (date of birth)"
            if m.start() not in taken and _cue_after(text, m.end(), _BIRTH_AFTER):
                iso = self._iso(m)
                if iso:
                    yield self._hit(text, m.start(), m.end(), iso)

    def _iso(self, m: re.Match) -> str | None:
        g = m.groupdict()
        if g["iy"]:
            return norm.iso_date(int(g["iy"]), int(g["im"]), int(g["id"]))
        if g["a"]:
            a, b, y = int(g["a"]), int(g["b"]), int(g["y"])
            day, month = (a, b) if self.day_first else (b, a)
            return norm.iso_date(y, month, day) or norm.iso_date(y, day, month)
        if g["d1"]:
            return norm.iso_date(int(g["y1"]), _month_number(g["mon"]), int(g["d1"]))
        return norm.iso_date(int(g["y2"]), _month_number(g["mon2"]), int(g["d2"]))


@register("ip_address")
class IpAddressDetector(Detector):
    name = entity_type = "ip_address"
    _V4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
    _V6 = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Fa-f:])")
    _VERSION = re.compile(r"(?i)(?:\bv|version\s*)$")

    def __init__(self, settings: DetectionSettings):
        pass

    def detect(self, text):
        for m in self._V4.finditer(text):
            if self._VERSION.search(text, max(0, m.start() - 9), m.start()):
                continue
            try:
                ip = ipaddress.IPv4Address(m.group())
            except ValueError:
                continue
            yield self._hit(text, m.start(), m.end(), str(ip))
        for m in self._V6.finditer(text):
            if sum(c not in ":" for c in m.group()) < 3:
                continue
            try:
                ip = ipaddress.IPv6Address(m.group())
            except ValueError:
                continue
            yield self._hit(text, m.start(), m.end(), ip.compressed)


# -- names and custom types -------------------------------------------------------------

@register("person_name")
class PersonNameDetector(Detector):
    name = entity_type = "person_name"

    def __init__(self, settings: DetectionSettings):
        self.backend = get_name_backend(settings.name_backend, settings.name_model_path, settings.name_min_score)
        self.name = f"person_name:{settings.name_backend}"

    def detect(self, text):
        for start, end, _score in self.backend.find(text):
            canonical = norm.normalise_name(text[start:end])
            if len(canonical.replace(" ", "")) >= 2:
                yield self._hit(text, start, end, canonical)


def mod11_is_valid(value: str) -> bool:
    """Mod-11 check digit with weights n+1..2 (NHS style); 10 is never a valid check."""
    d = norm.digits(value)
    if len(d) < 2:
        return False
    total = sum(int(c) * w for c, w in zip(d[:-1], range(len(d), 1, -1)))
    check = 11 - total % 11
    check = 0 if check == 11 else check
    return check != 10 and check == int(d[-1])


def _custom_validator(spec: str | None, setting: str) -> Callable[[str], bool] | None:
    if not spec:
        return None
    if spec == "luhn":
        from stdnum import luhn
        return lambda v: luhn.is_valid(norm.digits(v)) if norm.digits(v) else False
    if spec == "iban":
        from stdnum import iban
        return iban.is_valid
    if spec == "mod11":
        return mod11_is_valid
    module_name, _, attr = spec.rpartition(".")
    try:
        fn = getattr(importlib.import_module(module_name), attr) if module_name else None
    except (ImportError, AttributeError):
        fn = None
    if not callable(fn):
        raise UserFacingError(f"{setting}: {spec!r} is not luhn, iban, mod11 or an importable "
                              f"dotted path to a function f(value) -> bool")
    return fn


class CustomDetector(Detector):
    """A user-defined entity type from ``pii.custom``."""

    def __init__(self, spec: dict, index: int):
        self.entity_type = spec["name"]
        self.name = f"custom:{spec['name']}"
        self.regex = re.compile(spec["pattern"], re.IGNORECASE if spec.get("ignore_case") else 0)
        self.group = spec.get("value_group", 0)
        self.ignore_case = bool(spec.get("ignore_case"))
        self.validator = _custom_validator(spec.get("validator"), f"pii.custom[{index}].validator")

    def detect(self, text):
        for m in self.regex.finditer(text):
            start, end = m.span(self.group)
            value = text[start:end]
            if start == end or (self.validator and not self.validator(value)):
                continue
            canonical = re.sub(r"\s+", " ", value.strip())
            yield self._hit(text, start, end, canonical.upper() if self.ignore_case else canonical)


# -- the set of detectors a run uses ------------------------------------------------------

class DetectorSet:
    """The configured detectors; ``detect`` returns non-overlapping findings sorted by start."""

    def __init__(self, settings: DetectionSettings):
        self.settings = settings
        self.detectors: list[tuple[int, Detector]] = []
        for i, spec in enumerate(settings.custom):
            self.detectors.append((0, CustomDetector(dict(spec), i)))
        for name in settings.detectors:
            self.detectors.append((PRIORITY.index(name), REGISTRY[name](settings)))

    def detect(self, text: str | None) -> list[Detection]:
        if not text:
            return []
        found = []
        for priority, detector in self.detectors:
            for hit in detector.detect(text):
                found.append((priority, hit.start - hit.end, hit.start, hit))
        found.sort(key=lambda f: f[:3])
        kept: list[Detection] = []
        for *_, hit in found:
            if all(hit.end <= k.start or k.end <= hit.start for k in kept):
                kept.append(hit)
        return sorted(kept, key=lambda h: h.start)


@lru_cache(maxsize=4)
def get_detector_set(settings: DetectionSettings) -> DetectorSet:
    """One detector set per Python worker and settings (name models load once)."""
    return DetectorSet(settings)

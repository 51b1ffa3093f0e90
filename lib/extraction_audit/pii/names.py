"""Person-name backends, chosen by ``pii.name_backend``.

- ``builtin``: no download, works offline and in CI.  Name lists: Faker's per-locale first
  and last names (every locale, Latin-script entries and romanised forms; ``name_lists``)
  plus the bundled ``first_names.py``.  Runs of capitalised words are names when a cue
  before them says so (a title ``Mr``/``Dr``; a label ``Name:``, ``Patient:``, ``Dear``, ``my
  name is``, ``Signed``; a greeting or sign-off ``Hi``, ``Thanks,`` with a listed name), or
  when a listed first name is followed by a surname.  Context rules keep the rest out:
  greetings and discourse words (``Hiya``, ``Right``, ``Great``), speaker labels and common
  capitalised words are never names; a surname that is also a place word (Hall, Hill, Green,
  Park) counts after a first name unless the run follows a locative word (``near Victoria
  Park``) or is followed by a place or organisation word (``Grace Church Hall``, ``Victoria
  Station``).  ``tests/pii_eval`` measures it; it misses lower-case names and unlisted
  names with no cue.
- ``presidio``: Microsoft Presidio's analyzer with a spaCy model (``pii.name_model_path``
  names the installed spaCy package or its folder; default ``en_core_web_sm``).
- ``hf``: a Hugging Face token-classification model from the local folder
  ``pii.name_model_path`` (labels ``PER``/``PERSON``).

Each backend returns ``(start, end, score)`` character spans.  Models are loaded once per
Python worker (``get_name_backend`` caches them).

Reads and writes no tables.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from ..errors import UserFacingError
from .first_names import FIRST_NAMES

_WORD = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*\.?")
_TITLES = {"Mr", "Mrs", "Ms", "Miss", "Mx", "Dr", "Prof", "Sir", "Dame", "Rev", "Lady", "Lord", "Master", "Madam"}
# Capitalised words that are never (part of) a name here: function words, greetings and
# discourse words that open a chat turn, speaker and form labels, calendar words, and place
# and organisation words that are not surnames.
_NOT_NAMES = frozenset("""
The A An And Or But If In On At To From For With By Of As Is It Its This That These Those There Then
Here We You He She They I My Our Your His Her Their Please Thank Thanks Hello Hi Hiya Hey Dear Yes No
Not Right Great Lovely Perfect Brilliant Cheers Okay Ok OK Sure Sorry Morning Afternoon Evening Night
Alright Absolutely Wonderful Fab Ta Bear Fine Good Excellent Awesome Cool Super Yeah Yep Nope Hmm Oh
Ah Well So Just Also Actually Anyway Unfortunately Sadly Certainly Definitely Course Indeed Noted Done
Welcome Sounds Speak Talk Regarding Re Fwd Fw Subject Can Could Would Should Shall Might Must
Do Does Did Have Has Had Let Lets Let's Ask Call Ring Send Email Text Visit Check See Note Kind Best
Many Warm Yours Sincerely Regards Agent Advisor Adviser Support Bot Visitor Caller Customer Client
Accounts Team Claims Services Staff Operator Admin Office Form Ref Date Signature Applicant Payment
Membership Policy Ticket Version Model Flight Order Invoice Tracking Case Postcode SKU Copyright
Licensed License Licence Software Permission Distributed Public General Free Foundation Boost MIT
Apache GNU Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April June
July August September October November December Mon Tue Wed Thu Fri Sat Sun Jan Feb Mar Apr Jul
Aug Sep Sept Oct Nov Dec NI Today Tomorrow Yesterday Christmas Easter God Sir Madam Street St Road Rd
Avenue Ave Close Drive Way Place Square Mount Valley Court House Hospital Clinic Surgery Ward Bank
Building Society Ltd Limited Inc Corp Company Group Trust University College School Council Centre
Center Department Ministry Government Royal National Health Care London Manchester Birmingham Leeds
Glasgow Edinburgh Bristol Liverpool England Scotland Wales Ireland Britain British United Kingdom
States America American New York Washington California Texas North South East West Account Number
Card Phone Mobile Tel Telephone Address Birth Patient Name Full Sort Code Reference Total Summary
Notes Discharge Admission Diagnosis Report Section Chapter Page Table Figure Doctor Nurse Signed
Contact Attn Cardholder Holder Next Kin Station Airport Cathedral Chapel Museum Library Gallery
Bridge Gardens Garden Market Institute Tech Academy Stadium Arena Theatre Theater Hotel Inn Bay
Beach Island Forest Castle Tower Gate Airways Airlines Motors Media News Times Post Herald Press
Club League Cup Energy Water Insurance Homes Telecom Broadband Mutual Web Amazon Google Microsoft
Visa Mastercard Amex IBAN NHS SSN NINO DOB IP ID UK US USA EU Mr Mrs Ms Miss Mx Dr Prof
Nobody Somebody Anybody Everybody Someone Anyone Everyone Noone Nothing Something Anything Everything
Nowhere Somewhere Anywhere Everywhere None Each Every All Both Either Neither Other Another Such
""".split())
# Place words that are also common surnames: a name after a first name, else a place.
_PLACE_WORDS = frozenset("Hill Hall Green Park Wood Cross Church Lane Field Brook Moss Marsh Stone Heath "
                         "Grove Dale Ford Bridge Gate Vale Row End Common Fields Hills Woods".split())
# Words after a run that make it a place or organisation ("Victoria Station", "Grace Church Hall").
_ORG_AFTER = frozenset("Street St Road Rd Avenue Lane Close Drive Way Place Square Station Airport "
                       "Hospital Infirmary Clinic Surgery University College School Tech Institute Academy "
                       "Church Cathedral Chapel Hall Park Gardens Green Hill Bridge Market Stadium Arena "
                       "Theatre Hotel Services Ltd Limited Inc Group Trust Council Centre Center Museum "
                       "Library Gallery Bank Society Foundation Airways Airlines Motors Vic".split())
_LOCATIVE = re.compile(r"(?i)\b(?:near|at|in|via|opposite|outside|around|towards|into|past|along|through|"
                       r"behind|beside|visit|visited|visiting)\s+(?:the\s+)?$")
_TITLE_CUE = re.compile(r"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Dame|Rev|Lady|Lord)\.?\s+$")
# Cues strong enough for a name that is in no list.
_STRONG_CUE = re.compile(
    r"(?:\b(?:[Pp]atient(?:\s+name)?|[Nn]ame|[Ff]ull\s+name|[Cc]ustomer\s+name|[Cc]lient|Dear|[Ss]igned|"
    r"Attn|FAO|[Cc]ardholder|[Aa]ccount\s+holder|[Nn]ext\s+of\s+kin|[Cc]laimant|[Aa]pplicant|[Tt]enant|"
    r"[Ee]mployee|[Rr]esident|[Oo]pened\s+by|[Ss]ubmitted\s+by|[Mm]y\s+name\s+is|[Nn]ame's|[Ss]poke\s+(?:to|with)|"
    r"[Ss]peaking\s+(?:to|with)|[Cc]aller|[Oo]n\s+behalf\s+of|[Ii]n\s+the\s+name\s+of|[Nn]amed|[Cc]alled)"
    r"\s*[:,\-]?|\b(?:[Tt]his\s+is|I'm|I\s+am|[Ii]t's))\s*$")
# Cues that make a listed name a name even alone ("Hi Priya", "Thanks,\nPriya").
_WEAK_CUE = re.compile(
    r"(?:\b(?:Hi|Hello|Hey|Hiya|Morning|Thanks|Thank\s+you|Cheers|Regards|Sincerely|[Ww]ishes|[Tt]hanks|"
    r"[Cc]ustomer|[Cc]ontact|[Mm]ember|[Ff]or|[Ww]ith|[Bb]y|[Ff]rom|[Uu]nder|[Hh]usband|[Ww]ife|[Ss]on|"
    r"[Dd]aughter|[Mm]other|[Ff]ather|[Pp]artner|Re|cc|CC)\s*[:,\-]?)\s*$")
_PERSON_AFTER = re.compile(r"^(?:\s*\((?:account\s+holder|customer|patient|caller)\)|\s+speaking\b|"
                           r"\s+(?:rang|called|phoned|emailed|wrote|said|gave|confirmed|provided)\b)")
_SURNAME_FIRST = re.compile(r"(?<![\w'])([A-Z][A-Z'\-]+(?:\s[A-Z][A-Z'\-]+)?),\s+([A-Z][a-z]+(?:-[a-z]+)?)(?![\w'])")


def _fold(word: str) -> str:
    """``Zoë`` -> ``zoe``: the key names are looked up by."""
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold().replace("’", "'")


@lru_cache(maxsize=1)
def name_lists() -> tuple[frozenset[str], frozenset[str]]:
    """(first names, last names), folded: Faker's lists for every locale it ships (Latin
    script and romanised forms) plus ``first_names.py``; common capitalised words removed."""
    import importlib
    import pkgutil

    import faker.providers.person as person

    latin = re.compile(r"^[A-Za-z\u00C0-\u024F\u1E00-\u1EFF'’\- ]+$")
    firsts: set[str] = set(FIRST_NAMES)
    lasts: set[str] = set()
    for module in pkgutil.iter_modules(person.__path__):
        provider = importlib.import_module(f"{person.__name__}.{module.name}").Provider
        for attr in dir(provider):
            if not attr.endswith("names") or attr.startswith("_") or not ("first" in attr or "last" in attr):
                continue
            values = getattr(provider, attr, ())
            if not isinstance(values, (tuple, list, dict, set, frozenset)):
                continue
            target = firsts if "first" in attr else lasts
            for name in values:
                if isinstance(name, str) and latin.match(name):
                    target.update(_fold(w) for w in name.split())
    stop = {_fold(w) for w in _NOT_NAMES}
    return frozenset(firsts - stop), frozenset(lasts - stop)


class _Tok(NamedTuple):
    start: int
    end: int
    word: str


class BuiltinNameBackend:
    """Runs of capitalised words confirmed by a cue or by the name lists (``name_lists``)."""

    name = "builtin"

    def __init__(self):
        self.firsts, self.lasts = name_lists()

    def find(self, text: str) -> list[tuple[int, int, float]]:
        spans: list[tuple[int, int, float]] = []
        for m in _SURNAME_FIRST.finditer(text):  # "HALL, Evie" in forms
            last, first = m.group(1), m.group(2)
            if _fold(first) in self.firsts and all(_fold(w) in self.lasts for w in last.split()):
                spans.append((m.start(), m.end(), 0.9))
        for run in self._runs(text):
            for span in self._names_in_run(text, run):
                if not any(span[0] < e and s < span[1] for s, e, _ in spans):
                    spans.append(span)
        return sorted(spans)

    @staticmethod
    def _shape(word: str) -> str:
        core = word.rstrip(".")
        if len(core) == 1 and core.isupper():
            return "initial" if word.endswith(".") else "other"
        if word.endswith("."):
            return "other"
        if core.isupper():
            return "upper"
        parts = re.split(r"['’\-]", core)
        if core[0].isupper() and (core[1:].islower() or re.fullmatch(r"(?:Mc|Mac|O')[A-Z]\w+", core)) \
                or all(p[:1].isupper() and p[1:].islower() for p in parts if p):
            return "title"
        return "other"

    def _runs(self, text: str) -> list[list[_Tok]]:
        """Maximal runs of same-shape capitalised words separated by one space; a title,
        a common capitalised word or anything else ends a run."""
        runs: list[list[_Tok]] = []
        current: list[_Tok] = []
        shape = None
        for m in _WORD.finditer(text):
            word = m.group()
            if word.endswith(".") and len(word) > 2:
                word = word[:-1]  # a full stop, not an initial
            tok = _Tok(m.start(), m.start() + len(word), word)
            kind = self._shape(word)
            bare = word.rstrip(".")
            if kind == "upper":
                bare = bare.title()
            name_like = kind in ("title", "upper", "initial") and not {bare, word} & (_NOT_NAMES | _TITLES)
            joins = current and text[current[-1].end:tok.start] in (" ", "  ", "\t") and (kind == shape or kind == "initial")
            if current and not (name_like and joins):
                runs.append(current)
                current = []
            if name_like:
                if not current:
                    shape = kind if kind != "initial" else None
                if kind != "initial" or current:
                    current.append(tok)
        if current:
            runs.append(current)
        return runs

    def _known(self, word: str) -> tuple[bool, bool]:
        key = _fold(word.rstrip("."))
        return key in self.firsts, key in self.lasts

    def _names_in_run(self, text: str, run: list[_Tok]) -> list[tuple[int, int, float]]:
        while run and run[-1].word.endswith("."):  # a trailing initial is not part of a name
            run = run[:-1]
        if not run:
            return []
        before = text[max(0, run[0].start - 40):run[0].start]
        line_before = before.rsplit("\n", 1)[-1]
        after_word = re.match(r" ([A-Z][a-z]+)", text[run[-1].end:run[-1].end + 20])
        if after_word and after_word.group(1) in _ORG_AFTER:
            return []  # Victoria Station, Grace Church Hall
        if re.search(r"(?i)\bthe\s+$", before):
            return []  # "the Jordan River", "the Bank of England"
        upper = run[0].word.isupper()
        known = [self._known(t.word) for t in run]
        if _TITLE_CUE.search(line_before) and not upper:
            span = run[:3]
            return [(span[0].start, span[-1].end, 0.9)]
        if re.match(r" \d", text[run[-1].end:run[-1].end + 2]) and run[-1].word in ("May", "Jun", "June"):
            run = run[:-1]  # "May 9, 1942" is a date
            if not run:
                return []
            known = known[:len(run)]
        if re.search(r"\d+[A-Za-z]?,?\s+$", line_before) and run[-1].word in _PLACE_WORDS | _ORG_AFTER:
            return []  # "24 Church Lane"
        rest_of_line = text[run[-1].end:].split("\n", 1)[0]
        signoff = re.search(r"(?i)(?:regards|sincerely|wishes|thanks|cheers|best|yours|thank\s+you)\s*,?\s*\n\s*$",
                            before) and not rest_of_line.strip(" .,")
        greeting = re.fullmatch(r"(?:Hi|Hello|Hey|Hiya|Dear|Morning|Good\s+morning)\s+", line_before) \
            and re.match(r"\s*[,!\n]", rest_of_line or "\n")
        if _STRONG_CUE.search(line_before) or _PERSON_AFTER.match(text[run[-1].end:]) or signoff or greeting:
            span = run[:3]
            return [(span[0].start, span[-1].end, 0.9)]
        if _WEAK_CUE.search(line_before) and (known[0][0] or known[0][1] and len(run) == 1):
            span = run[:3]
            return [(span[0].start, span[-1].end, 0.8)]
        if _LOCATIVE.search(line_before):
            return []  # "held near Long Eaton": without a person cue, a place
        out = []
        i = 0
        while i < len(run) - 1:
            (first_i, last_i), (first_n, last_n) = known[i], known[i + 1]
            surname_first = last_i and first_n and not first_i and not upper  # "Chen Jing"
            if first_i or surname_first:
                j = i + 1
                while j + 1 < len(run) and j + 1 - i < 3 and (any(known[j + 1]) or not upper):
                    j += 1
                span = run[i:j + 1]
                if upper and not all(any(k) for k in known[i:j + 1]):
                    i += 1
                    continue
                place_end = span[-1].word in _PLACE_WORDS
                if place_end and (_LOCATIVE.search(text[max(0, span[0].start - 20):span[0].start])
                                  or len(span) >= 3 and span[-2].word in _PLACE_WORDS):
                    i = j + 1
                    continue
                out.append((span[0].start, span[-1].end, 0.7))
                i = j + 1
            else:
                i += 1
        return out


class HfNameBackend:
    """A local Hugging Face token-classification model (``pii.name_model_path``)."""

    name = "hf"
    _CHUNK_CHARS = 1000

    def __init__(self, path: str, min_score: float):
        from transformers import pipeline

        try:
            self.pipe = pipeline("token-classification", model=path, tokenizer=path,
                                 aggregation_strategy="simple", device=-1)
        except (OSError, ValueError) as err:
            raise UserFacingError(f"pii.name_model_path: cannot load a token-classification model "
                                  f"from {path!r}: {err}") from None
        self.min_score = min_score

    def find(self, text: str) -> list[tuple[int, int, float]]:
        spans = []
        for offset, chunk in _chunks(text, self._CHUNK_CHARS):
            for ent in self.pipe(chunk):
                label = str(ent.get("entity_group") or ent.get("entity") or "").upper()
                if label.split("-")[-1] in ("PER", "PERSON") and float(ent["score"]) >= self.min_score:
                    spans.append((offset + int(ent["start"]), offset + int(ent["end"]), float(ent["score"])))
        return spans


class PresidioNameBackend:
    """Presidio's analyzer (PERSON entities) over a locally installed spaCy model."""

    name = "presidio"

    def __init__(self, model: str, min_score: float):
        from presidio_analyzer import AnalyzerEngine
        from presidio_analyzer.nlp_engine import NlpEngineProvider

        provider = NlpEngineProvider(nlp_configuration={
            "nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": model}]})
        self.engine = AnalyzerEngine(nlp_engine=provider.create_engine(), supported_languages=["en"])
        self.min_score = min_score

    def find(self, text: str) -> list[tuple[int, int, float]]:
        results = self.engine.analyze(text=text, entities=["PERSON"], language="en")
        return [(r.start, r.end, float(r.score)) for r in results if r.score >= self.min_score]


def _chunks(text: str, size: int):
    """Split at whitespace into pieces of at most ~size characters, with their offsets."""
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind(" ", start + size // 2, end)
            end = cut if cut > start else end
        yield start, text[start:end]
        start = end


def check_name_backend(backend: str, model_path: str | None) -> None:
    """Fail on the driver, naming the setting, before any Spark task starts."""
    if backend == "builtin":
        return
    if backend == "hf":
        if not model_path:
            raise UserFacingError("pii.name_backend is 'hf' but pii.name_model_path is not set "
                                  "(a local folder holding a token-classification model)")
        folder = Path(model_path)
        if not folder.is_dir() or not (folder / "config.json").is_file():
            raise UserFacingError(f"pii.name_model_path: no Hugging Face model at {model_path!r} "
                                  f"(expected a readable folder with config.json)")
        return
    if backend == "presidio":
        try:
            import presidio_analyzer  # noqa: F401
            import spacy
        except ImportError:
            raise UserFacingError(
                "pii.name_backend is 'presidio' but presidio-analyzer / spaCy are not installed "
                "(pip install presidio-analyzer spacy, then install a spaCy model), or choose "
                "pii.name_backend: builtin") from None
        model = model_path or "en_core_web_sm"
        if not (spacy.util.is_package(model) or Path(model).is_dir()):
            raise UserFacingError(f"pii.name_model_path: spaCy model {model!r} is not installed "
                                  f"(needed by pii.name_backend 'presidio')")
        return
    raise UserFacingError(f"pii.name_backend: unknown backend {backend!r} (builtin, presidio, hf)")


@lru_cache(maxsize=4)
def get_name_backend(backend: str, model_path: str | None, min_score: float):
    """One backend instance per Python worker and setting."""
    check_name_backend(backend, model_path)
    if backend == "builtin":
        return BuiltinNameBackend()
    if backend == "hf":
        return HfNameBackend(model_path, min_score)
    return PresidioNameBackend(model_path or "en_core_web_sm", min_score)

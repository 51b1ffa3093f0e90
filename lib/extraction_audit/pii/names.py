"""Person-name backends, chosen by ``pii.name_backend``.

- ``builtin``: no download, works offline and in CI.  Sequences of capitalised words are
  names when a cue precedes them (``Mr``, ``Dr``, ``Patient:``, ``Name:``, ``Dear``...) or
  when they start with a first name from the bundled list (``first_names.py``) and have a
  surname after it.  Precision/recall on the test fixture is printed by
  ``tests/test_pii_names.py``; it misses names outside the list without a cue and names
  written in lower or upper case.
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
from functools import lru_cache
from pathlib import Path

from ..errors import UserFacingError
from .first_names import FIRST_NAMES

_UPPER = "A-ZÀ-ÖØ-Þ"
_LOWER = "a-zß-öø-ÿ"
_NAME_WORD = re.compile(
    rf"(?<![\w'])(?:(?:Mc|Mac|O')[{_UPPER}][{_LOWER}]+|[{_UPPER}][{_LOWER}]+(?:-[{_UPPER}][{_LOWER}]+)?"
    rf"|[{_UPPER}]\.(?=\s))(?![\w'])")
_TITLES = {"Mr", "Mrs", "Ms", "Miss", "Mx", "Dr", "Prof", "Sir", "Dame", "Rev", "Lady", "Lord"}
_CUE_BEFORE = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Dame|Rev|Lady|Lord)\.?"
    r"|\b(?:[Pp]atient(?:\s+name)?|[Nn]ame|[Ff]ull\s+name|[Cc]ustomer|[Cc]lient|Dear|[Ss]igned|Attn|"
    r"[Cc]ontact|[Cc]ardholder|[Aa]ccount\s+holder|[Ss]incerely|[Rr]egards|[Nn]ext\s+of\s+kin|Re|"
    r"[Cc]laimant|[Aa]pplicant|[Tt]enant|[Ee]mployee|[Mm]ember|[Rr]esident|[Oo]pened\s+by|[Ss]ubmitted\s+by)"
    r"\s*[:,\-]?)\s*$")
# Capitalised words that are not names (sentence starts, calendar, places, organisations).
_NOT_NAMES = frozenset("""
The A An And Or But If In On At To From For With By Of As Is It Its This That These Those There
Here We You He She They I My Our Your His Her Their Please Thank Thanks Hello Hi Dear Yes No Not
Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July
August September October November December Street St Road Rd Lane Avenue Ave Close Drive Way Place
Square Hill Park River Lake Mount Valley Court House Hospital Clinic Surgery Ward Bank Building
Society Ltd Limited Inc Corp Company Group Trust Foundation University College School Council
Centre Center Department Office Service Services Ministry Government Royal National Health Care
London Manchester Birmingham Leeds Glasgow Edinburgh Bristol Liverpool England Scotland Wales Ireland
Britain British United Kingdom States America American New York Washington California Texas North
South East West Account Number Card Phone Email Address Date Birth Patient Name Customer Client
Sort Code Reference Ref Total Summary Note Notes Discharge Admission Diagnosis Report Section Chapter
Page Table Figure Mon Tue Wed Thu Fri Sat Sun Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec
Today Tomorrow Yesterday Christmas Easter God Lord Sir Madam Team Support Agent Manager Doctor Nurse
Signed Regards Sincerely Best Kind Yours Contact Attn Cardholder Holder Next Kin Full
Station Airport Church Cathedral Chapel Hall Museum Library Gallery Bridge Gardens Garden Market
Institute Tech Academy Stadium Arena Theatre Theater Hotel Inn Bay Beach Island Forest Castle Tower
Cross Green Gate Airways Airlines Motors Media News Times Post Herald Press Club League Cup
""".split())


class BuiltinNameBackend:
    """Capitalised-word sequences confirmed by a cue or by the bundled first-name list."""

    name = "builtin"

    def find(self, text: str) -> list[tuple[int, int, float]]:
        spans = []
        for run in self._capitalised_runs(text):
            spans.extend(self._names_in_run(text, run))
        return spans

    @staticmethod
    def _capitalised_runs(text: str) -> list[list[re.Match]]:
        """Maximal runs of capitalised words separated by spaces (at most two); titles and common
        capitalised non-names split runs (a title is then seen as a cue by the run after it)."""
        runs: list[list[re.Match]] = []
        current: list[re.Match] = []
        for m in _NAME_WORD.finditer(text):
            word = m.group()
            if current and (word in _NOT_NAMES or word in _TITLES
                            or text[current[-1].end():m.start()] not in ("  ", " ", "\t")):
                runs.append(current)
                current = []
            if word not in _NOT_NAMES and word not in _TITLES:
                current.append(m)
        if current:
            runs.append(current)
        return runs

    @staticmethod
    def _names_in_run(text: str, run: list[re.Match]) -> list[tuple[int, int, float]]:
        while run and run[-1].group().endswith("."):  # a trailing initial is not part of a name
            run = run[:-1]
        if not run:
            return []
        cued = _CUE_BEFORE.search(text, max(0, run[0].start() - 30), run[0].start()) is not None
        if cued:
            span = run[:3]
            return [(span[0].start(), span[-1].end(), 0.9)]
        out = []
        i = 0
        while i < len(run):
            if run[i].group().lower() in FIRST_NAMES and i + 1 < len(run):
                span = run[i:i + 3]
                out.append((span[0].start(), span[-1].end(), 0.7))
                i += len(span)
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

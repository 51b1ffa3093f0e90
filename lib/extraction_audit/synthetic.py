"""Embedded demo and test assets, built offline and deterministically from a seed.

Why: the audit needs a corpus, a model that memorised part of it, and the ground truth of
what it memorised, so that tests and the demo can check the whole pipeline end to end
without downloading anything.  ``ensure_demo_assets(root)`` builds (or reuses) under
``root``::

    corpus/part-0000N.jsonl   training documents (id, text, source) -- defines doc counts
    holdout.jsonl             similar prose that is NOT in the corpus (chance baseline)
    public_prompts.txt        public text, one line each, to draw short prompts from
    planted.json              {"passages": [...], "pii": [...]}: the ground truth
    tokenizer/                byte-level BPE (<|endoftext|> = bos/eos/unk/pad)
    model/                    tiny GPT-2 that memorised the rare planted passages
    reference-model/          smaller, less trained GPT-2 (membership reference / control)
    manifest.json             written last: build parameters hash, version, timings

Planted content: rare passages (a bank chat, discharge summaries, casework letters ...)
in one or two documents each (privacy findings), a licence boilerplate in many documents,
low-entropy filler (number lists, ``= = =`` separators), and personal data (names next to
emails, UK/US phones, Luhn-valid cards, IBAN, sort code + account, SSN, mod-11 NHS numbers,
NI numbers, dates of birth, IP addresses) both inside and outside the rare passages.  The
rare documents are oversampled in the training stream only, never in the corpus files.

Reads and writes no Delta tables: it only writes files under ``root``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

import numpy as np

log = logging.getLogger(__name__)

#: Bump when the generated content or the training recipe changes: cached builds with
#: another version are rebuilt.
ASSETS_VERSION = 3
EOT = "<|endoftext|>"
_ASSET_ENTRIES = ("corpus", "holdout.jsonl", "public_prompts.txt", "planted.json",
                  "tokenizer", "model", "reference-model")


# --------------------------------------------------------------------------------------
# Build parameters and the returned handle
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelShape:
    n_layer: int
    n_embd: int
    n_head: int
    steps: int
    batch_size: int = 16
    seq_len: int = 128
    learning_rate: float = 3e-3


@dataclass(frozen=True)
class DemoParams:
    """Everything that determines the build; its hash decides whether a cache is reused."""

    seed: int = 0
    n_docs: int = 300
    n_holdout: int = 60
    n_public_lines: int = 120
    docs_per_file: int = 100
    boilerplate_docs: int = 36
    number_filler_docs: int = 8
    separator_filler_docs: int = 6
    pii_docs: int = 30
    vocab_size: int = 2048
    n_positions: int = 512
    rare_oversample: int = 30
    # Measured (seed 0, 300 steps): greedy decoding from 12 tokens reproduces every rare
    # passage in full (the reference: 0-1 tokens); sampling at temperature 1 reproduces the
    # next 50 tokens with probability 0.48-0.71 per passage (0.17-0.49 at 220 steps); no
    # ordinary document is reproduced for 50 tokens.  The reference sees no oversampling.
    model: ModelShape = field(default_factory=lambda: ModelShape(n_layer=3, n_embd=128, n_head=4, steps=300))
    reference: ModelShape = field(
        default_factory=lambda: ModelShape(n_layer=2, n_embd=64, n_head=2, steps=120))

    def digest(self) -> str:
        payload = json.dumps({"version": ASSETS_VERSION, "params": asdict(self)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class DemoAssets:
    """Paths to the built assets and the ground truth of what was planted.

    ``planted``: dicts with id, kind ("rare" | "boilerplate" | "filler"), text, doc_ids,
    in_public_prompts.  ``planted_pii``: dicts with entity_type (the PII detector names:
    email, phone, card, iban, uk_bank_account, us_ssn, nhs_number, uk_nino, date_of_birth,
    ip_address, person_name), value (canonical form), text (the exact substring found in
    every listed document), doc_ids, in_rare_passage, passage_id.
    """

    root: Path
    corpus_dir: Path
    holdout_path: Path
    prompts_path: Path
    model_dir: Path
    reference_model_dir: Path
    tokenizer_dir: Path
    planted: list[dict[str, Any]]
    planted_pii: list[dict[str, Any]]
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def rare_passages(self) -> list[dict[str, Any]]:
        return [p for p in self.planted if p["kind"] == "rare"]


# --------------------------------------------------------------------------------------
# Word lists for ordinary prose (no person names: every name in the corpus is planted PII)
# --------------------------------------------------------------------------------------

_ROLES = (
    "the librarian", "a local baker", "the new council officer", "my neighbour", "the head teacher",
    "a retired engineer", "the station manager", "our landlord", "the bus driver", "a young farmer",
    "the museum guide", "a visiting cousin", "the ferry captain", "the postman", "an elderly painter",
    "the football coach", "a market trader", "the night nurse", "the shop owner", "a keen cyclist",
    "the choir leader", "a quiet student", "the harbour master", "the village doctor", "a travelling chef",
    "the parish clerk", "a dog walker", "the park ranger", "the site foreman", "a junior reporter",
    "the beekeeper", "the plumber", "a weekend sailor", "the stall holder", "the hotel porter",
    "a bored teenager", "the allotment secretary", "the school cook", "a night watchman", "the organist",
)
_VERBS = (  # (base, past)
    ("repair", "repaired"), ("paint", "painted"), ("move", "moved"), ("sell", "sold"), ("find", "found"),
    ("carry", "carried"), ("clean", "cleaned"), ("borrow", "borrowed"), ("build", "built"),
    ("collect", "collected"), ("deliver", "delivered"), ("inspect", "inspected"), ("measure", "measured"),
    ("plant", "planted"), ("polish", "polished"), ("replace", "replaced"), ("sketch", "sketched"),
    ("wrap", "wrapped"), ("count", "counted"), ("hide", "hid"), ("lift", "lifted"), ("load", "loaded"),
    ("mend", "mended"), ("order", "ordered"), ("photograph", "photographed"), ("prepare", "prepared"),
    ("return", "returned"), ("sort", "sorted"), ("test", "tested"), ("weigh", "weighed"), ("bake", "baked"),
    ("fold", "folded"), ("label", "labelled"), ("lock", "locked"), ("open", "opened"), ("pack", "packed"),
    ("push", "pushed"), ("rescue", "rescued"), ("share", "shared"), ("steer", "steered"), ("trim", "trimmed"),
    ("water", "watered"), ("drop", "dropped"), ("fetch", "fetched"), ("sweep", "swept"), ("buy", "bought"),
)
_ADJECTIVES = (
    "old", "bright", "narrow", "heavy", "quiet", "crooked", "shiny", "muddy", "broken", "enormous", "tiny",
    "wooden", "rusty", "fragile", "colourful", "damp", "dusty", "elegant", "faded", "gentle", "golden",
    "hollow", "icy", "lopsided", "noisy", "pale", "peculiar", "plain", "polished", "ragged", "sturdy",
    "tangled", "warm", "wobbly", "curious", "spare", "borrowed", "stubborn", "clumsy", "tidy", "crowded",
    "empty", "distant", "familiar", "handmade", "striped", "frozen", "ancient", "modern", "soggy",
)
_NOUNS = (
    "bicycle", "ladder", "teapot", "umbrella", "lantern", "bench", "wheelbarrow", "kettle", "window",
    "fence", "piano", "suitcase", "notebook", "boat", "garden gate", "clock", "map", "blanket", "oven",
    "staircase", "bookshelf", "greenhouse", "chimney", "basket", "mailbox", "tractor", "rowing boat",
    "radio", "telescope", "carpet", "scarecrow", "bridge", "lighthouse", "wardrobe", "sandcastle",
    "hammock", "fountain", "bell tower", "drum", "chessboard", "toolbox", "caravan", "canoe", "doorbell",
    "weathervane", "market stall", "pram", "bonfire", "sign post", "picnic table",
)
_PLURALS = (
    "apples", "tomatoes", "bricks", "letters", "candles", "buckets", "pebbles", "jars of honey", "tickets",
    "maps", "chairs", "plates", "shoes", "kites", "flowerpots", "parcels", "blankets", "bottles", "spoons",
    "batteries", "seeds", "postcards", "loaves", "ropes", "lamps", "boxes", "puzzles", "paintbrushes",
    "hedgehogs", "pigeons", "sheep", "bicycles", "tents", "sandwiches", "hats", "keys", "coins",
)
_PLACES = (
    "Ashford Vale", "Millbrook", "Kestrel Bay", "Oakhurst", "Fenwick Green", "Harrowdale", "Brindle Cross",
    "Upper Tansley", "Marlow End", "Cobbleford", "Wrenfield", "Eastmere", "Larkspur Hill", "Thornbury Quay",
    "Pendle Rise", "Saltmarsh", "Holloway Park", "Greywater", "Linden Row", "Foxley Common",
)
_TIMES = (
    "on Tuesday morning", "last spring", "after the storm", "before lunch", "during the festival",
    "at dawn", "late on Friday", "over the weekend", "in the middle of winter", "just before midnight",
    "after the market closed", "on a wet afternoon", "during the school holidays", "the day after the fair",
    "while the tide was out", "at the end of summer", "early yesterday", "on the first warm evening",
    "before the first frost", "as the bells rang",
)
_ADVERBS = (
    "carefully", "slowly", "proudly", "quietly", "eagerly", "nervously", "happily", "reluctantly",
    "quickly", "patiently", "clumsily", "secretly", "cheerfully", "gently", "suddenly", "boldly",
)
_NUMBERS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "twenty")
_WEATHER = (
    "it rains", "the wind picks up", "the river floods", "the fog rolls in", "the sun comes out",
    "snow settles", "the evenings get longer", "the frost is hard",
)
_SAID = ("said", "admitted", "explained", "complained", "joked", "insisted", "remarked", "whispered")
_SOURCES = ("blog", "forum", "news", "newsletter", "reviews", "letters")

_TEMPLATES = (
    "{Role} {past} {det} {adj} {noun} {time}.",
    "In {place}, {role} {past} {det} {noun} near the {noun2}.",
    "{Time}, the {plural} in {place} were {adj} and {adj2}.",
    "Nobody expected the {noun} to be so {adj}, {said} {role}.",
    "{Role} {adv} {past} the {plural} before {role2} arrived.",
    "We {past} {det} {adj} {noun}, {det2} {noun2} and {num} {adj2} {plural}.",
    "If the {noun} is {adj}, {role} will {base} the {plural} {time}.",
    "The {noun} at {place} has been {adj} since {year}.",
    "Why would {role} {base} {det} {adj} {noun} {time}?",
    "{Num} {plural} were {past} while {role} {past2} the {noun2}.",
    "Most people in {place} {base} their {plural} when {weather}.",
    "According to {role}, the {adj} {noun} was {past} {time} and never {past2} again.",
    "There were {num} {plural} beside the {adj} {noun}, and {role} {past} all of them.",
    "{Role} asked whether anyone had {past} the {noun} from {place}.",
    "It took {num} hours to {base} the {noun2}, {said} {role}, so we {past2} the {plural} instead.",
    "By the time {role} reached {place}, the {adj} {noun} had been {past}.",
)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _prose_sentence(rng: np.random.Generator) -> str:
    def pick(seq):
        return seq[int(rng.integers(len(seq)))]

    template = pick(_TEMPLATES)
    (base, past), (_, past2) = pick(_VERBS), pick(_VERBS)
    role, time_, num = pick(_ROLES), pick(_TIMES), pick(_NUMBERS)
    slots = {
        "role": role, "Role": _cap(role), "role2": pick(_ROLES), "base": base, "past": past, "past2": past2,
        "det": pick(("a", "the", "my", "our", "one")), "det2": pick(("a", "the", "an old", "some")),
        "adj": pick(_ADJECTIVES), "adj2": pick(_ADJECTIVES), "noun": pick(_NOUNS), "noun2": pick(_NOUNS),
        "plural": pick(_PLURALS), "place": pick(_PLACES), "time": time_, "Time": _cap(time_),
        "adv": pick(_ADVERBS), "num": num, "Num": _cap(num), "weather": pick(_WEATHER),
        "said": pick(_SAID), "year": str(int(rng.integers(1890, 2021))),
    }
    return template.format(**slots)


def _prose(rng: np.random.Generator, n_min: int, n_max: int) -> str:
    return " ".join(_prose_sentence(rng) for _ in range(int(rng.integers(n_min, n_max + 1))))


# --------------------------------------------------------------------------------------
# Personal data generators.  Check digits are computed here (not with python-stdnum) so
# that the tests can validate them independently with python-stdnum.
# --------------------------------------------------------------------------------------

_FIRST_NAMES = (
    "Priya", "Callum", "Eleanor", "Marcus", "Siobhan", "Tomasz", "Aisha", "Gareth", "Ingrid", "Declan",
    "Fatima", "Rhys", "Beatrix", "Oluwaseun", "Harriet", "Mateo", "Yasmin", "Lachlan", "Rosalind", "Kwame",
)
_LAST_NAMES = (
    "Raman", "Whitlock", "Okafor", "Pemberton", "Castellano", "Nakamura", "Fairbairn", "Lindqvist",
    "Hargreaves", "Mbeki", "Thistlewood", "Kowalczyk", "Ashdown", "Ferreira", "Quinlan", "Abernethy",
)
_EMAIL_DOMAINS = ("example.com", "example.org", "example.net", "mail.example.co.uk")
_UK_PHONE_PREFIXES = ("020 7946 0", "0161 496 0", "0113 496 0", "0121 496 0")  # Ofcom drama ranges
_US_AREA_CODES = ("201", "212", "312", "415", "617", "713")  # 555-01XX: reserved fictional lines
_BANK_CODES = ("NWBK", "BARC", "LOYD", "MIDL", "HBUK")


def _digits(rng: np.random.Generator, n: int) -> str:
    return "".join(str(int(d)) for d in rng.integers(0, 10, size=n))


def luhn_check_digit(payload: str) -> str:
    """The Luhn digit that makes ``payload + digit`` valid (payment cards)."""
    total = 0
    for i, ch in enumerate(reversed(payload)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


def nhs_check_digit(first9: str) -> str | None:
    """NHS number mod-11 check digit, or None when the nine digits admit no valid one."""
    remainder = sum(int(d) * (10 - i) for i, d in enumerate(first9)) % 11
    check = 11 - remainder
    if check == 11:
        return "0"
    return None if check == 10 else str(check)


def iban_check_digits(country: str, bban: str) -> str:
    """ISO 13616 mod-97 check digits."""
    rearranged = bban + country + "00"
    numeric = "".join(str(int(ch, 36)) for ch in rearranged)
    return f"{98 - int(numeric) % 97:02d}"


class _PiiFactory:
    """Draws fresh (never repeated) personal data values from one seeded RNG."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self._used: set[str] = set()

    def _fresh(self, make) -> Any:
        for _ in range(1000):
            value = make()
            key = value if isinstance(value, str) else repr(value)
            if key not in self._used:
                self._used.add(key)
                return value
        raise RuntimeError("could not draw a fresh synthetic value")

    def _pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def name(self) -> str:
        return self._fresh(lambda: f"{self._pick(_FIRST_NAMES)} {self._pick(_LAST_NAMES)}")

    def email_for(self, name: str) -> str:
        first, last = name.lower().split(" ", 1)
        style = int(self.rng.integers(3))
        local = (f"{first}.{last}", f"{first[0]}{last}", f"{first}{int(self.rng.integers(10, 99))}")[style]
        return self._fresh(lambda: f"{local}@{self._pick(_EMAIL_DOMAINS)}")

    def uk_phone(self) -> str:
        return self._fresh(lambda: self._pick(_UK_PHONE_PREFIXES) + _digits(self.rng, 3))

    def us_phone(self) -> str:
        return self._fresh(lambda: f"({self._pick(_US_AREA_CODES)}) 555-01{_digits(self.rng, 2)}")

    def card(self) -> str:
        def make():
            payload = "4" + _digits(self.rng, 14)
            number = payload + luhn_check_digit(payload)
            return " ".join(number[i:i + 4] for i in range(0, 16, 4))
        return self._fresh(make)

    def sort_code_account(self) -> tuple[str, str]:
        def make():
            sort = _digits(self.rng, 6)
            return f"{sort[:2]}-{sort[2:4]}-{sort[4:]}", str(int(self.rng.integers(1, 10))) + _digits(self.rng, 7)
        return self._fresh(make)

    def iban(self) -> str:
        def make():
            bban = self._pick(_BANK_CODES) + _digits(self.rng, 14)
            compact = "GB" + iban_check_digits("GB", bban) + bban
            return " ".join(compact[i:i + 4] for i in range(0, len(compact), 4))
        return self._fresh(make)

    def us_ssn(self) -> str:
        def make():
            area = int(self.rng.integers(1, 900))
            while area == 666:
                area = int(self.rng.integers(1, 900))
            group, serial = int(self.rng.integers(1, 100)), int(self.rng.integers(1, 10000))
            return f"{area:03d}-{group:02d}-{serial:04d}"
        return self._fresh(make)

    def nhs_number(self) -> str:
        def make():
            while True:
                first9 = str(int(self.rng.integers(4, 7))) + _digits(self.rng, 8)
                check = nhs_check_digit(first9)
                if check is not None:
                    number = first9 + check
                    return f"{number[:3]} {number[3:6]} {number[6:]}"
        return self._fresh(make)

    def uk_nino(self) -> str:
        first, second = "ABCEGHJKLMNOPRSTWXYZ", "ABCEGHJKLMNPRSTWXYZ"
        banned = {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}

        def make():
            while True:
                prefix = self._pick(first) + self._pick(second)
                if prefix not in banned:
                    d = _digits(self.rng, 6)
                    return f"{prefix} {d[:2]} {d[2:4]} {d[4:]} {self._pick('ABCD')}"
        return self._fresh(make)

    def date_of_birth(self, us: bool = False) -> str:
        def make():
            day, month, year = int(self.rng.integers(1, 29)), int(self.rng.integers(1, 13)), int(
                self.rng.integers(1935, 2004))
            return f"{month:02d}/{day:02d}/{year}" if us else f"{day:02d}/{month:02d}/{year}"
        return self._fresh(make)

    def ip_address(self) -> str:
        firsts = (23, 51, 62, 81, 86, 90, 109, 145, 151, 185, 193, 212)
        return self._fresh(lambda: ".".join(
            [str(self._pick(firsts))] + [str(int(x)) for x in self.rng.integers(1, 255, size=3)]))


# --------------------------------------------------------------------------------------
# Planted passages
# --------------------------------------------------------------------------------------

_BOILERPLATE = (
    "This article is published under the Open Community Content Licence, version 2.1. You may copy, "
    "share and adapt this material in any medium or format for any purpose, provided that you give "
    "appropriate credit to the original authors, include a link to the licence and indicate whether "
    "changes were made. You may not apply legal terms or technological measures that restrict others "
    "from doing anything the licence permits. The material is provided as is, without warranty of any "
    "kind, and the authors accept no liability for any loss arising from its use."
)
_NUMBER_FILLER = " ".join(str(i) for i in range(120))
_SEPARATOR_FILLER = " ".join(["="] * 80)


@dataclass
class _PiiSlot:
    entity_type: str
    value: str
    text: str


def _rare_passages(pii: _PiiFactory, rng: np.random.Generator) -> list[tuple[str, str, list[_PiiSlot], int]]:
    """(passage_id, text, pii slots, number of documents) for every rare planted passage."""
    out = []

    def ref() -> str:
        return _digits(rng, 5)

    # 1. Bank customer-service chat (use case: bank privacy team), in two documents.
    name = pii.name()
    email, phone, card = pii.email_for(name), pii.uk_phone(), pii.card()
    sort, account = pii.sort_code_account()
    text = (
        f"Northgate Bank live chat transcript, reference NB-{ref()}. Agent: Good afternoon, you are "
        f"through to card services, how can I help? Customer {name}: Hi, my card {card} was declined at "
        f"a petrol station this morning. Agent: Sorry to hear that. Can you confirm the phone number "
        f"on the account? Customer: It is {phone}, and my email is {email}. Agent: Thank you. I can see "
        f"a hold placed after an unusual payment from sort code {sort}, account number {account}. I have "
        f"lifted the hold, so the card will work again within ten minutes."
    )
    out.append(("rare-bank-chat", text, [
        _PiiSlot("person_name", name, name), _PiiSlot("card", card, card), _PiiSlot("phone", phone, phone),
        _PiiSlot("email", email, email),
        _PiiSlot("uk_bank_account", f"{sort} {account}", f"sort code {sort}, account number {account}"),
    ], 2))

    # 2. Hospital discharge summary (use case: clinical note completion), one document.
    name = pii.name()
    nhs, dob, phone = pii.nhs_number(), pii.date_of_birth(), pii.uk_phone()
    text = (
        f"Riverside General Hospital discharge summary. Patient: {name}, NHS number {nhs}, born on {dob}. "
        f"Admitted through the emergency department with shortness of breath and a productive cough lasting "
        f"nine days. Chest radiograph showed right lower lobe consolidation. Treated with intravenous "
        f"amoxicillin for three days, then oral doxycycline. Discharged home with a follow up appointment at "
        f"the respiratory clinic in six weeks. The family can contact Ward Nine on {phone} with any concerns."
    )
    out.append(("rare-discharge-summary", text, [
        _PiiSlot("person_name", name, name), _PiiSlot("nhs_number", nhs, nhs),
        _PiiSlot("date_of_birth", dob, f"born on {dob}"), _PiiSlot("phone", phone, phone),
    ], 1))

    # 3. Government casework correspondence (use case: citizen-facing assistant), one document.
    name = pii.name()
    nino, dob, phone = pii.uk_nino(), pii.date_of_birth(), pii.uk_phone()
    text = (
        f"Department for Housing casework reply HC-{ref()}. Dear {name}, thank you for your letter about the "
        f"damp in the back bedroom of your flat on Juniper Lane. We have matched your claim to national "
        f"insurance number {nino}, DOB: {dob}, and confirmed that the property is managed by the council. A "
        f"surveyor will visit on the morning of the fourteenth to measure the moisture in the walls. If the "
        f"date is not convenient, please call the casework team on {phone} and quote the reference above."
    )
    out.append(("rare-casework-letter", text, [
        _PiiSlot("person_name", name, name), _PiiSlot("uk_nino", nino, nino),
        _PiiSlot("date_of_birth", dob, f"DOB: {dob}"), _PiiSlot("phone", phone, phone),
    ], 1))

    # 4. US insurance claim note, one document.
    name = pii.name()
    ssn, dob, phone = pii.us_ssn(), pii.date_of_birth(us=True), pii.us_phone()
    email = pii.email_for(name)
    text = (
        f"Lakeshore Mutual claims note, file LM-{ref()}. Claimant {name}, SSN {ssn}, date of birth {dob}, "
        f"reported water damage to the kitchen ceiling after a pipe burst in the upstairs bathroom. The "
        f"adjuster reached the claimant at {phone} and by email at {email} to arrange an inspection. "
        f"Photographs show staining across roughly forty square feet of plaster. Recommend approval of the "
        f"repair, less the five hundred dollar deductible."
    )
    out.append(("rare-insurance-claim", text, [
        _PiiSlot("person_name", name, name), _PiiSlot("us_ssn", ssn, ssn),
        _PiiSlot("date_of_birth", dob, f"date of birth {dob}"), _PiiSlot("phone", phone, phone),
        _PiiSlot("email", email, email),
    ], 1))

    # 5. IT helpdesk ticket, in two documents.
    name = pii.name()
    email, ip, iban = pii.email_for(name), pii.ip_address(), pii.iban()
    text = (
        f"Helpdesk ticket HD-{ref()} opened by {name} ({email}). Summary: repeated failed sign in attempts "
        f"from the address {ip} overnight, followed by a password reset request that the user did not make. "
        f"Actions taken: account locked, sessions revoked and the user asked to choose a new passphrase. The "
        f"duplicate subscription charge has been refunded to IBAN {iban} within three working days."
    )
    out.append(("rare-helpdesk-ticket", text, [
        _PiiSlot("person_name", name, name), _PiiSlot("email", email, email),
        _PiiSlot("ip_address", ip, ip), _PiiSlot("iban", iban, iban),
    ], 2))

    # 6. GP referral letter, one document.
    name = pii.name()
    nhs, dob = pii.nhs_number(), pii.date_of_birth()
    text = (
        f"Meadowbank Surgery referral letter to the orthopaedic team. Re: {name}, DOB: {dob}, NHS number "
        f"{nhs}. Thank you for seeing this keen amateur runner who has had pain on the inner side of the "
        f"left knee for four months, worse on stairs and after long runs. There is mild swelling and "
        f"tenderness along the joint line. Six weeks of physiotherapy have not helped. I would be grateful "
        f"for your assessment and whether a scan of the knee is needed."
    )
    out.append(("rare-referral-letter", text, [
        _PiiSlot("person_name", name, name), _PiiSlot("date_of_birth", dob, f"DOB: {dob}"),
        _PiiSlot("nhs_number", nhs, nhs),
    ], 1))
    return out


def _ordinary_pii_sentence(pii: _PiiFactory, kind: int) -> tuple[str, list[_PiiSlot]]:
    """A sentence carrying personal data outside the rare passages (not memorised)."""
    if kind == 0:
        name = pii.name()
        email = pii.email_for(name)
        return (f"Please send the signed form to {name} at {email} before Friday.",
                [_PiiSlot("person_name", name, name), _PiiSlot("email", email, email)])
    if kind == 1:
        phone = pii.uk_phone()
        return f"For bookings ring the hall on {phone} after six.", [_PiiSlot("phone", phone, phone)]
    if kind == 2:
        phone = pii.us_phone()
        return f"The shop in Boston can be reached at {phone} on weekdays.", [_PiiSlot("phone", phone, phone)]
    if kind == 3:
        name, dob = pii.name(), pii.date_of_birth()
        return (f"The winner, {name}, was born on {dob} and still swims every morning.",
                [_PiiSlot("person_name", name, name), _PiiSlot("date_of_birth", dob, f"born on {dob}")])
    if kind == 4:
        ip = pii.ip_address()
        return f"The forum banned posts from {ip} after the spam attack.", [_PiiSlot("ip_address", ip, ip)]
    if kind == 5:
        card = pii.card()
        return (f"A reader posted the card number {card} by mistake and the moderators removed it.",
                [_PiiSlot("card", card, card)])
    if kind == 6:
        nino = pii.uk_nino()
        return f"The sample form shows the insurance number {nino} in the top box.", [_PiiSlot("uk_nino", nino, nino)]
    ssn = pii.us_ssn()
    return f"The letter quoted the social security number {ssn} in full.", [_PiiSlot("us_ssn", ssn, ssn)]


# --------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------


@dataclass
class SyntheticCorpus:
    docs: list[dict[str, str]]
    holdout: list[dict[str, str]]
    public_lines: list[str]
    planted: list[dict[str, Any]]
    planted_pii: list[dict[str, Any]]


def build_corpus(params: DemoParams) -> SyntheticCorpus:
    """Generate the documents, hold-out, public prompt lines and ground truth (pure, seeded)."""
    root_seq = np.random.SeedSequence([params.seed, 20240611])
    doc_rng, pii_rng, holdout_rng, public_rng, order_rng = (np.random.default_rng(s) for s in root_seq.spawn(5))
    pii = _PiiFactory(pii_rng)

    # Every document starts as a "body" (list of text pieces); planted content is then
    # attached by index, and finally the order is shuffled and ids assigned.
    rare = _rare_passages(pii, doc_rng)
    n_rare_docs = sum(n for *_, n in rare)
    n_plain = params.n_docs - n_rare_docs
    bodies: list[list[str]] = [[_prose(doc_rng, 3, 7)] for _ in range(n_plain)]
    sources = [_SOURCES[int(doc_rng.integers(len(_SOURCES)))] for _ in range(n_plain)]
    tags: list[list[tuple[str, Any]]] = [[] for _ in range(n_plain)]

    def choose(k: int, exclude: set[int] = frozenset()) -> list[int]:
        pool = np.array([i for i in range(n_plain) if i not in exclude])
        return sorted(int(i) for i in doc_rng.choice(pool, size=k, replace=False))

    boiler_idx = choose(params.boilerplate_docs)
    for k, i in enumerate(boiler_idx):  # a header in half the documents, a footer in the rest
        bodies[i].insert(0 if k % 2 else len(bodies[i]), _BOILERPLATE)
        tags[i].append(("boilerplate", None))
    number_idx = choose(params.number_filler_docs)
    for i in number_idx:
        bodies[i].insert(1, "Reference table: " + _NUMBER_FILLER)
        tags[i].append(("filler-number-list", None))
    sep_idx = choose(params.separator_filler_docs, set(number_idx))
    for i in sep_idx:
        bodies[i].insert(1, _SEPARATOR_FILLER)
        tags[i].append(("filler-separator", None))
    pii_idx = choose(params.pii_docs)
    for j, i in enumerate(pii_idx):
        sentence, slots = _ordinary_pii_sentence(pii, j % 8)
        bodies[i].insert(1, sentence)
        tags[i].append(("pii", slots))

    # Rare passage documents: the passage alone, or a short preamble then the passage.
    rare_docs: list[tuple[str, str]] = []  # (passage_id, text)
    for pid, text, _, n in rare:
        rare_docs.append((pid, text))
        for _ in range(n - 1):
            rare_docs.append((pid, _prose(doc_rng, 1, 2) + "\n\n" + text))

    texts = ["\n\n".join(b) for b in bodies] + [t for _, t in rare_docs]
    doc_sources = sources + ["support-records"] * len(rare_docs)
    order = order_rng.permutation(len(texts))
    doc_id = {int(old): f"doc-{new:05d}" for new, old in enumerate(order)}
    docs = [{"id": doc_id[int(old)], "text": texts[int(old)], "source": doc_sources[int(old)]} for old in order]

    def ids(indexes) -> list[str]:
        return sorted(doc_id[i] for i in indexes)

    rare_doc_ids: dict[str, list[str]] = {}
    for k, (pid, _) in enumerate(rare_docs):
        rare_doc_ids.setdefault(pid, []).append(doc_id[n_plain + k])

    planted: list[dict[str, Any]] = []
    for pid, text, _, _ in rare:
        planted.append({"id": pid, "kind": "rare", "text": text, "doc_ids": sorted(rare_doc_ids[pid])})
    planted.append({"id": "boilerplate-licence", "kind": "boilerplate", "text": _BOILERPLATE,
                    "doc_ids": ids(boiler_idx)})
    planted.append({"id": "filler-number-list", "kind": "filler", "text": _NUMBER_FILLER,
                    "doc_ids": ids(number_idx)})
    planted.append({"id": "filler-separator", "kind": "filler", "text": _SEPARATOR_FILLER,
                    "doc_ids": ids(sep_idx)})

    planted_pii: list[dict[str, Any]] = []
    for pid, _, slots, _ in rare:
        for s in slots:
            planted_pii.append({"entity_type": s.entity_type, "value": s.value, "text": s.text,
                                "doc_ids": sorted(rare_doc_ids[pid]), "in_rare_passage": True, "passage_id": pid})
    for i in pii_idx:
        for kind, slots in tags[i]:
            if kind == "pii":
                for s in slots:
                    planted_pii.append({"entity_type": s.entity_type, "value": s.value, "text": s.text,
                                        "doc_ids": ids([i]), "in_rare_passage": False, "passage_id": None})

    holdout = [{"id": f"holdout-{k:05d}", "text": _prose(holdout_rng, 3, 7), "source": "holdout"}
               for k in range(params.n_holdout)]

    # Public prompt lines: ordinary prose, the opening words of four of the six rare
    # passages (public-prefix prompting can trigger those), and the licence's opening.
    public = [_prose_sentence(public_rng) for _ in range(params.n_public_lines)]
    for k, p in enumerate(planted):
        p["in_public_prompts"] = p["kind"] == "boilerplate" or (p["kind"] == "rare" and k % 3 != 2)
        if p["in_public_prompts"]:
            public.append(" ".join(p["text"].split()[:8]))
    public = [public[int(i)] for i in public_rng.permutation(len(public))]

    corpus_texts = {d["text"] for d in docs}
    collisions = [h["id"] for h in holdout if any(h["text"] in t for t in corpus_texts)]
    if collisions:  # cannot happen with this much randomness; never ship a wrong baseline
        raise RuntimeError(f"hold-out documents also occur in the corpus: {collisions[:3]}")
    return SyntheticCorpus(docs, holdout, public, planted, planted_pii)


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


def write_corpus(corpus: SyntheticCorpus, root: Path, docs_per_file: int) -> None:
    """Write the corpus files, hold-out, public prompts and planted.json under ``root``."""
    corpus_dir = root / "corpus"
    corpus_dir.mkdir(parents=True, exist_ok=True)
    for part, start in enumerate(range(0, len(corpus.docs), docs_per_file)):
        _write_jsonl(corpus_dir / f"part-{part:05d}.jsonl", corpus.docs[start:start + docs_per_file])
    _write_jsonl(root / "holdout.jsonl", corpus.holdout)
    (root / "public_prompts.txt").write_text("\n".join(corpus.public_lines) + "\n", encoding="utf-8")
    (root / "planted.json").write_text(
        json.dumps({"passages": corpus.planted, "pii": corpus.planted_pii}, indent=1, sort_keys=True) + "\n",
        encoding="utf-8")


# --------------------------------------------------------------------------------------
# Tokenizer and models
# --------------------------------------------------------------------------------------


def train_tokenizer(texts: list[str], vocab_size: int = 2048):
    """Byte-level BPE trained on ``texts``, wrapped as a ``PreTrainedTokenizerFast``.

    Byte-level so that any generated or corpus text round-trips; small so ids fit uint16.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOT, eos_token=EOT, unk_token=EOT,
                                   pad_token=EOT, model_max_length=512)


def _idle_cores() -> int:
    """Cores this process may use that are not already busy.

    Why not simply all cores: on an oversubscribed machine torch's intra-op threads spin
    waiting for each other; measured on 2 shared cores, 2 threads trained 5x slower than 1.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS / Windows
        cores = os.cpu_count() or 1
    try:  # a container's CPU quota (cgroup v2) can be below the visible cores
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    try:
        busy = os.getloadavg()[0]
    except OSError:  # pragma: no cover
        busy = 0.0
    return max(1, min(cores, int(cores - busy + 0.5)))


@contextlib.contextmanager
def _torch_threads(threads: int | None = None) -> Iterator[None]:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads or _idle_cores())
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _training_stream(doc_ids: list[list[int]], weights: list[int], eos: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Documents (each repeated ``weight`` times, shuffled) joined by eos, and the offset
    of the eos that opens each document."""
    order = np.repeat(np.arange(len(doc_ids)), weights)
    rng.shuffle(order)
    pieces, starts, pos = [], [], 0
    for i in order:
        pieces.append(np.asarray([eos] + doc_ids[i], dtype=np.int64))
        starts.append(pos)
        pos += len(doc_ids[i]) + 1
    pieces.append(np.asarray([eos], dtype=np.int64))
    return np.concatenate(pieces), np.asarray(starts, dtype=np.int64)


def train_tiny_gpt2(doc_token_ids: list[list[int]], vocab_size: int, eos_id: int, shape: ModelShape, *,
                    seed: int, n_positions: int = 512, oversample: list[int] | None = None,
                    threads: int | None = None, label: str = "model"):
    """Train a tiny GPT-2 from scratch on CPU; returns ``(model, seconds)``.

    Training windows start at a document's opening ``<|endoftext|>`` or first token half of
    the time, and at a uniformly random offset otherwise.  Position ids count from the start
    of the document the window begins in, as at generation time: a passage is then learnt at
    the positions a prompt made of its opening words puts it at (measured: with positions
    counted from the window start instead, greedy reproduction broke off at position 128,
    the window length), and positions up to ~doc length + window get trained, so long
    generations stay sane.  ``oversample[i]`` repeats document ``i`` in the training stream:
    this is how rare passages are memorised while the corpus files hold them once or twice.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    started = time.perf_counter()
    rng = np.random.default_rng([seed, shape.n_layer, shape.n_embd, shape.steps])
    torch.manual_seed(seed)
    weights = oversample or [1] * len(doc_token_ids)
    stream, starts = _training_stream(doc_token_ids, weights, eos_id, rng)
    L = shape.seq_len
    if len(stream) <= L + 1 or L > n_positions:
        raise ValueError(f"seq_len {L} must be shorter than the training stream and at most n_positions")
    config = GPT2Config(vocab_size=vocab_size, n_positions=n_positions, n_embd=shape.n_embd,
                        n_layer=shape.n_layer, n_head=shape.n_head, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id)
    with _torch_threads(threads):
        model = GPT2LMHeadModel(config)
        model.loss_type = "ForCausalLM"  # GPT2LMHeadModel leaves it unset and transformers warns
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=shape.learning_rate, weight_decay=0.0,
                                      betas=(0.9, 0.98))
        warmup = max(1, shape.steps // 20)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(
            0.1, 1.0 - s / shape.steps))
        max_start, max_position = len(stream) - L, n_positions - L
        offsets = np.arange(L)
        mask = torch.ones(shape.batch_size, L, dtype=torch.long)  # no padding: eos are real tokens
        for step in range(shape.steps):
            aligned = rng.random(shape.batch_size) < 0.5
            doc_pick = starts[rng.integers(len(starts), size=shape.batch_size)] + rng.integers(0, 2, shape.batch_size)
            begin = np.where(aligned, doc_pick, rng.integers(0, max_start, size=shape.batch_size))
            begin = np.minimum(begin, max_start)
            doc_of_begin = np.searchsorted(starts, begin, side="right") - 1
            first_position = np.clip(begin - starts[doc_of_begin] - 1, 0, max_position)
            batch = torch.from_numpy(stream[begin[:, None] + offsets[None, :]])
            positions = torch.from_numpy(first_position[:, None] + offsets[None, :])
            loss = model(input_ids=batch, attention_mask=mask, position_ids=positions, labels=batch).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            if (step + 1) % max(1, shape.steps // 10) == 0 or step == shape.steps - 1:
                elapsed = time.perf_counter() - started
                log.info("demo assets: training %s: step %d/%d (%d%%), loss %.3f, ETA %.0f s", label, step + 1,
                         shape.steps, 100 * (step + 1) // shape.steps, loss.item(),
                         elapsed / (step + 1) * (shape.steps - step - 1))
        model.eval()
    model.generation_config.pad_token_id = eos_id
    return model, time.perf_counter() - started


# --------------------------------------------------------------------------------------
# Build, cache, load
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    """Serialise builders of one root across processes (POSIX ``flock``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX: best effort, no lock
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_manifest(root: Path) -> dict[str, Any] | None:
    try:
        return json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _assets_from(root: Path, manifest: dict[str, Any]) -> DemoAssets:
    planted = json.loads((root / "planted.json").read_text(encoding="utf-8"))
    return DemoAssets(root=root, corpus_dir=root / "corpus", holdout_path=root / "holdout.jsonl",
                      prompts_path=root / "public_prompts.txt", model_dir=root / "model",
                      reference_model_dir=root / "reference-model", tokenizer_dir=root / "tokenizer",
                      planted=planted["passages"], planted_pii=planted["pii"], manifest=manifest)


def _build(staging: Path, params: DemoParams) -> dict[str, Any]:
    started = time.perf_counter()
    log.info("demo assets: building the synthetic corpus, tokenizer and two tiny models under %s (once)",
             staging.parent)
    corpus = build_corpus(params)
    write_corpus(corpus, staging, params.docs_per_file)

    texts = [d["text"] for d in corpus.docs]
    tokenizer = train_tokenizer(texts, params.vocab_size)
    tokenizer.save_pretrained(staging / "tokenizer")
    eos = tokenizer.convert_tokens_to_ids(EOT)
    doc_tokens = [e.ids for e in tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False)]
    rare_ids = {d for p in corpus.planted if p["kind"] == "rare" for d in p["doc_ids"]}
    oversample = [params.rare_oversample if d["id"] in rare_ids else 1 for d in corpus.docs]

    timings, cpu_timings, threads = {}, {}, _idle_cores()  # once: our own training would count as busy
    for name, shape, weights in (("model", params.model, oversample), ("reference-model", params.reference, None)):
        cpu_started = time.process_time()
        model, seconds = train_tiny_gpt2(doc_tokens, len(tokenizer), eos, shape, seed=params.seed,
                                         n_positions=params.n_positions, oversample=weights, threads=threads,
                                         label=name)
        model.save_pretrained(staging / name)
        tokenizer.save_pretrained(staging / name)
        timings[name] = round(seconds, 2)
        cpu_timings[name] = round(time.process_time() - cpu_started, 2)
    total = time.perf_counter() - started
    print(f"extraction_audit.synthetic: built demo assets in {total:.1f} s (training on {threads} thread(s): "
          f"model {timings['model']:.1f} s, reference {timings['reference-model']:.1f} s; CPU time "
          f"{sum(cpu_timings.values()):.1f} s)", file=sys.stderr)
    return {
        "version": ASSETS_VERSION, "params_hash": params.digest(), "params": asdict(params),
        "build_seconds": round(total, 2), "train_seconds": timings,
        "train_cpu_seconds": cpu_timings, "train_threads": threads,
        "docs": len(corpus.docs), "corpus_tokens": int(sum(len(t) for t in doc_tokens)),
        "vocab_size": len(tokenizer), "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def ensure_demo_assets(root: Path | str, seed: int = 0, force: bool = False,
                       params: DemoParams | None = None) -> DemoAssets:
    """Build the demo assets into ``root`` unless a complete build with the same parameters
    is already there; returns their paths and ground truth.

    Safe against interruption and concurrent callers: builders hold a lock on
    ``root/.build.lock``, build in a staging folder, move the results in, and write
    ``manifest.json`` last (a build without a matching manifest is never reused).
    """
    if not str(root).strip():
        raise ValueError("ensure_demo_assets needs a folder, got an empty path")
    root = Path(root).resolve()
    params = replace(params or DemoParams(), seed=seed)
    root.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(root / ".build.lock"):
        manifest = _read_manifest(root)
        complete = all((root / name).exists() for name in _ASSET_ENTRIES)
        if not force and complete and manifest and manifest.get("params_hash") == params.digest():
            return _assets_from(root, manifest)
        (root / "manifest.json").unlink(missing_ok=True)
        for stale in root.glob(".staging-*"):
            shutil.rmtree(stale, ignore_errors=True)
        staging = root / f".staging-{uuid.uuid4().hex}"
        staging.mkdir()
        try:
            manifest = _build(staging, params)
            for name in _ASSET_ENTRIES:
                target = root / name
                if target.is_dir():
                    shutil.rmtree(target)
                elif target.exists():
                    target.unlink()
                os.replace(staging / name, target)
            _write_json_atomic(root / "manifest.json", manifest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return _assets_from(root, manifest)


def load_demo_assets(root: Path | str) -> DemoAssets:
    """The assets of a finished build under ``root``, whatever its parameters (no rebuild)."""
    root = Path(root).resolve()
    manifest = _read_manifest(root)
    if manifest is None or not all((root / name).exists() for name in _ASSET_ENTRIES):
        raise FileNotFoundError(f"no finished demo asset build in {root}: run ensure_demo_assets first")
    return _assets_from(root, manifest)


# --------------------------------------------------------------------------------------
# Ground-truth check: did the model memorise the rare passages?
# --------------------------------------------------------------------------------------


def greedy_match_length(model, prompt_ids: list[int], target_ids: list[int]) -> int:
    """How many of ``target_ids`` greedy decoding after ``prompt_ids`` reproduces before the
    first mismatch."""
    import torch

    with _torch_threads(), torch.no_grad():
        out = model.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids),
                             dtype=torch.long), max_new_tokens=len(target_ids), min_new_tokens=len(target_ids),
                             do_sample=False, pad_token_id=model.config.eos_token_id)
    produced = out[0, len(prompt_ids):].tolist()
    matched = 0
    for got, want in zip(produced, target_ids):
        if got != want:
            break
        matched += 1
    return matched


def memorisation_report(assets: DemoAssets, prefix_tokens: int = 12,
                        kinds: tuple[str, ...] = ("rare",)) -> list[dict[str, Any]]:
    """For each planted passage of ``kinds``, the number of following tokens that greedy
    decoding from its first ``prefix_tokens`` tokens reproduces exactly, for the model and
    for the reference model (no ``<|endoftext|>`` before the prompt, as with a public-text
    prefix).  Keys: id, kind, doc_ids, prefix_tokens, target_tokens, model_matched_tokens,
    reference_matched_tokens."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(assets.tokenizer_dir)
    models = {key: GPT2LMHeadModel.from_pretrained(path).eval()
              for key, path in (("model", assets.model_dir), ("reference", assets.reference_model_dir))}
    rows = []
    for passage in (p for p in assets.planted if p["kind"] in kinds):
        ids = tokenizer(passage["text"], add_special_tokens=False)["input_ids"]
        prompt, target = ids[:prefix_tokens], ids[prefix_tokens:]
        row = {"id": passage["id"], "kind": passage["kind"], "doc_ids": passage["doc_ids"],
               "prefix_tokens": len(prompt), "target_tokens": len(target)}
        for key, model in models.items():
            row[f"{key}_matched_tokens"] = greedy_match_length(model, prompt, target)
        rows.append(row)
    return rows

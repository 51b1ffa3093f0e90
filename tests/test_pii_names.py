"""Person-name backends: built-in precision/recall on a labelled fixture, the Hugging Face
backend on a tiny local model, and clear errors for missing backends or models."""

from __future__ import annotations

import pytest

from extraction_audit.config import parse_config
from extraction_audit.errors import UserFacingError
from extraction_audit.pii.detectors import DetectionSettings, DetectorSet
from extraction_audit.pii.names import BuiltinNameBackend, check_name_backend

# (text, gold name spans as written).  Hard cases on purpose: names outside the bundled
# list without a cue, lower/upper case, and capitalised non-names that look like names.
NAME_FIXTURE: list[tuple[str, list[str]]] = [
    ("Patient: Aoife Byrne was admitted overnight.", ["Aoife Byrne"]),
    ("Dear Mr Okonkwo, thank you for your letter.", ["Okonkwo"]),
    ("Dr. Rajesh Kumar reviewed the scan.", ["Rajesh Kumar"]),
    ("Signed: Marta Nowak", ["Marta Nowak"]),
    ("Name: Zbigniew Brzezinski, tenant since 2019.", ["Zbigniew Brzezinski"]),
    ("Oliver Twist called about the invoice.", ["Oliver Twist"]),
    ("I met Sarah Connor yesterday in town.", ["Sarah Connor"]),
    ("Emily Clarke and Tom Hughes attended the meeting.", ["Emily Clarke", "Tom Hughes"]),
    ("Xiomara Delgado won the regional prize.", ["Xiomara Delgado"]),
    ("An email from Kwabena Asante arrived late.", ["Kwabena Asante"]),
    ("Please contact john smith about the refund.", ["john smith"]),
    ("ATTENTION: JOHN SMITH MUST SIGN.", ["JOHN SMITH"]),
    ("Regards, Priya", ["Priya"]),
    ("Thanks, Priya!", ["Priya"]),
    ("Lewis Hamilton won again in Monaco.", ["Lewis Hamilton"]),
    ("Claimant Beatrix Quinlan reported water damage.", ["Beatrix Quinlan"]),
    ("Customer Callum Whitlock: my card was declined.", ["Callum Whitlock"]),
    ("Mrs. Eleanor Pemberton-Hargreaves will attend.", ["Eleanor Pemberton-Hargreaves"]),
    ("Ask Sean O'Brien or Ian McDonald.", ["Sean O'Brien", "Ian McDonald"]),
    ("Meeting notes by Sarah J. Connor follow.", ["Sarah J. Connor"]),
    ("The Jordan River floods every spring.", []),
    ("We walked to Victoria Station after lunch.", []),
    ("The May Day parade starts at noon.", []),
    ("The Bank of England raised rates.", []),
    ("Flights to New York City are delayed.", []),
    ("She studied at Georgia Tech for two years.", []),
    ("Grace Church Hall hosts the market.", []),
    ("Amazon Web Services had an outage.", []),
    ("Monday March 3 is a holiday in Leeds.", []),
    ("The Royal Infirmary opened a new ward.", []),
    ("Summary of Discharge: stable.", []),
    ("Contact Support Team on weekdays.", []),
    ("Will Jones attend the hearing?", ["Will Jones"]),
    ("Kind regards, Dr Okonjo.", ["Okonjo"]),
    ("Patient name: li wei", ["li wei"]),
    ("Chen Jing and Nguyen Van An signed the lease.", ["Chen Jing", "Nguyen Van An"]),
]


def spans_found(backend, text: str) -> set[str]:
    return {text[s:e] for s, e, _ in backend.find(text)}


def name_precision_recall(backend) -> tuple[float, float, int, int, int]:
    tp = fp = fn = 0
    for text, gold in NAME_FIXTURE:
        found, gold_set = spans_found(backend, text), set(gold)
        tp += len(found & gold_set)
        fp += len(found - gold_set)
        fn += len(gold_set - found)
    return tp / (tp + fp), tp / (tp + fn), tp, fp, fn


def test_builtin_backend_precision_recall_on_fixture():
    precision, recall, tp, fp, fn = name_precision_recall(BuiltinNameBackend())
    print(f"\nbuiltin person_name backend: precision {precision:.2f} recall {recall:.2f} "
          f"(tp {tp}, fp {fp}, fn {fn}, {len(NAME_FIXTURE)} texts)")
    assert precision >= 0.8
    assert recall >= 0.6


@pytest.mark.parametrize("text, expected", [
    ("Patient: Aoife Byrne", {"Aoife Byrne"}),
    ("Dr. Rajesh Kumar", {"Rajesh Kumar"}),
    ("The Jordan River", set()),
    ("Oliver", set()),  # a lone first name without a cue is too ambiguous
])
def test_builtin_backend_cases(text, expected):
    assert spans_found(BuiltinNameBackend(), text) == expected


def test_names_are_canonical_values():
    settings = DetectionSettings.from_config(parse_config({"pii": {"hmac_key": "k", "detectors": ["person_name"]}}))
    found = DetectorSet(settings).detect("Dear Mrs José  Álvarez, and José Alvarez again")
    assert {d.normalised for d in found} == {"jose alvarez"}
    assert {d.detector for d in found} == {"person_name:builtin"}


def test_presidio_backend_missing_is_a_clear_error():
    try:
        import presidio_analyzer  # noqa: F401
        pytest.skip("presidio is installed here")
    except ImportError:
        pass
    with pytest.raises(UserFacingError, match="pii.name_backend"):
        check_name_backend("presidio", None)
    with pytest.raises(UserFacingError, match="pii.name_backend"):
        DetectionSettings.from_config(parse_config({"pii": {"hmac_key": "k", "name_backend": "presidio"}}))


def test_hf_backend_needs_a_readable_model(tmp_path):
    with pytest.raises(UserFacingError, match="pii.name_model_path is not set"):
        check_name_backend("hf", None)
    with pytest.raises(UserFacingError, match="pii.name_model_path"):
        check_name_backend("hf", str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserFacingError, match="pii.name_model_path"):
        check_name_backend("hf", str(tmp_path / "empty"))


def tiny_person_tagger(folder) -> str:
    """A 1-layer BERT token classifier whose bias makes every token I-PER."""
    import torch
    from transformers import BertConfig, BertForTokenClassification, BertTokenizerFast

    words = ["alice", "met", "bob", "in", "town", "."]
    vocab = folder / "vocab.txt"
    folder.mkdir(parents=True, exist_ok=True)
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab))
    config = BertConfig(vocab_size=len(words) + 5, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, num_labels=3,
                        id2label={0: "O", 1: "B-PER", 2: "I-PER"}, label2id={"O": 0, "B-PER": 1, "I-PER": 2})
    torch.manual_seed(0)
    model = BertForTokenClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([-10.0, -10.0, 10.0]))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_hf_backend_runs_a_local_token_classifier(tmp_path):
    path = tiny_person_tagger(tmp_path / "tagger")
    settings = DetectionSettings.from_config(parse_config(
        {"pii": {"hmac_key": "k", "detectors": ["person_name"], "name_backend": "hf", "name_model_path": path}}))
    text = "alice met bob"
    found = DetectorSet(settings).detect(text)
    assert found and all(d.detector == "person_name:hf" and d.entity_type == "person_name" for d in found)
    assert all(0 <= d.start < d.end <= len(text) and d.surface == text[d.start:d.end] for d in found)
    assert "alice" in " ".join(d.normalised for d in found)

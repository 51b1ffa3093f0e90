"""Prose shared by the HTML report and the Markdown summary: effort, settings, limitations.

The limitations follow the technique's own list: a lower bound set by the effort spent,
dependence on prompts, the match rule's blind spots, and no formal guarantee.
"""

from __future__ import annotations

import json

from . import fmt


def _sampling(raw) -> str:
    try:
        settings = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
    except (TypeError, ValueError):
        return str(raw)
    return ", ".join(f"{k}={v}" for k, v in settings.items() if v is not None) or "defaults"


def scope_line(data) -> str:
    """Which samples the headline figures cover, and how the budget checkpoint differs: the
    console, the report and the model card print this same sentence."""
    main = data.main
    h, budget = main.headline, main.info.get("budget_tokens")
    text = (f"Figures are for the whole run: {fmt.number(h['samples'])} samples, "
            f"{fmt.number(h['generated_tokens'])} generated tokens")
    rows = data.growth[(data.growth["run_id"] == data.run_id) & (data.growth["budget_tokens"] == budget)] \
        if "budget_tokens" in data.growth else data.growth.iloc[0:0]
    if not fmt.is_missing(budget) and len(rows) and int(rows.iloc[0]["n_samples"]) != int(h["samples"] or 0):
        cp = rows.iloc[0]
        over = int(h["generated_tokens"] or 0) > int(budget)
        how = ("overshot it: generation stops after the chunk that crosses the budget" if over
               else "stopped short of it")
        text += (f" (budget {fmt.number(budget)}; the run {how}). The budget checkpoint at "
                 f"{fmt.number(budget)} tokens holds {fmt.number(cp['n_samples'])} samples: "
                 f"{fmt.number(cp['distinct_passages'])} passages, {fmt.number(cp['distinct_rare_passages'])} rare, "
                 f"share {fmt.number(cp['share_extracted'], True)} (growth table)")
    return text + "."


def settings_lines(data) -> list[str]:
    main = data.main
    info, h = main.info, main.headline
    n = info.get("match_n")
    lines = [
        f"Budget {fmt.number(info.get('budget_tokens'))} generated tokens; {fmt.number(h['generated_tokens'])} "
        f"generated in {fmt.number(h['samples'])} samples.",
        f"Sampling settings: {_sampling(info.get('sampling'))}.",
        f"Prompt strategies (share of samples): {info.get('prompt_strategy') or 'not recorded'}.",
        f"Match rule: a span of at least {n if not fmt.is_missing(n) else 'n'} tokens found verbatim in corpus "
        f"'{info.get('corpus_id')}' counts as extracted; low-entropy filler and passages that only copy the "
        "sample's prompt are flagged and excluded; "
        f"passages in 1–{data.rare_doc_count} documents are rare (privacy findings).",
        f"Uncertainty: {main.bootstrap_method}; confidence {data.confidence:.0%}.",
    ]
    for rid in data.compare_run_ids:
        other = data.runs[rid].info
        role = " (control)" if rid == info.get("control_run_id") else ""
        lines.append(f"Compared with {rid}{role}: model {other.get('model')}, budget "
                     f"{fmt.number(other.get('budget_tokens'))}, prompts {other.get('prompt_strategy')}.")
    return lines


def limitations(data) -> list[str]:
    main = data.main
    h = main.headline
    rich = main.richness
    growth = (f" The estimate above suggests about {fmt.number(rich.unseen)} further distinct passages the same "
              f"settings could still emit (sample coverage {rich.coverage:.1%})." if rich and rich.unseen >= 0.5
              else "")
    n = main.info.get("match_n")
    n_text = f"{n}-token" if not fmt.is_missing(n) else "minimum-length"
    return [
        f"Lower bound set by the effort spent. These counts are what {fmt.number(h['generated_tokens'])} generated "
        "tokens found; distinct extracted passages keep growing with the budget, and a model that leaks more than "
        "another at a small budget can leak less in total, so compare models on the growth curves, not at one "
        f"budget, and report the budget with the result.{growth}",
        f"Prompt dependence. Samples came from the prompt strategies {main.info.get('prompt_strategy')}. Much "
        "memorised text comes out only after the right prompt (its true opening words, or prompts that push a "
        "chat model off its chat behaviour), so a low rate under these prompts is weak evidence that the data "
        "cannot be extracted.",
        f"Match-rule blind spots. Only verbatim spans of the {n_text} minimum against the indexed corpus count: "
        "short secrets such as phone or account numbers are found only through personal-data tagging, "
        "paraphrased leaks and facts stitched together from several documents are not counted, and checking "
        "against a proxy for an unavailable corpus undercounts.",
        "Not a privacy guarantee. The audit shows what the model emitted, not what an attacker could infer; it "
        "does not say whether a given person's record was used in training and gives no bound for data the test "
        "did not happen to elicit, so a clean result cannot stand in for a formal guarantee such as differential "
        "privacy. Extracted passages and personal data found are copies of training data and must be stored, "
        "reviewed and deleted under the same controls as the training data.",
    ]


def pii_caveat(pii_by_type) -> str:
    """The precision caveat under the personal-data table (held-out evaluation figures)."""
    from ..pii.evaluation import HELDOUT_SNIPPETS

    text = (f"Precision and recall are the detectors' figures on the held-out half of the generated evaluation "
            f"set ({HELDOUT_SNIPPETS} snippets, tests/pii_eval): a measure on that generator's phrasings, not "
            f"on real model output, so real precision is likely lower; a type's counts may include false "
            f"positives at about (1 − precision) of its findings, and values the detectors miss in samples "
            f"are not counted at all. Custom types (pii.custom) are not evaluated.")
    if pii_by_type is not None and len(pii_by_type) and "heldout_precision" in pii_by_type:
        low = [f"{t} {p:.3f}" for t, p in zip(pii_by_type["entity_type"], pii_by_type["heldout_precision"])
               if p == p and p < 0.99]
        if low:
            text += " Held-out precision below 0.99: " + ", ".join(low) + "."
    return text

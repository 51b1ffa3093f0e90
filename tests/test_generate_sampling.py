"""Seeded sampler: temperature schedule, Gumbel draws, counter noise, batch independence."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from extraction_audit.config import SamplingConfig
from extraction_audit.generate.sampling import (
    BatchLayout,
    SeededSampler,
    apply_repetition_penalty,
    counter_uniform,
    temperature_at,
)

VOCAB = 300


def _layout(batch: int, prompt_width: int = 1, seeds=None) -> BatchLayout:
    return BatchLayout(pad_lengths=torch.zeros(batch, dtype=torch.int64), prompt_width=prompt_width,
                       seeds=torch.as_tensor(seeds if seeds is not None else np.arange(batch), dtype=torch.int64))


def _ids_at_step(step: int, batch: int = 4, prompt_width: int = 1) -> torch.Tensor:
    return torch.ones((batch, prompt_width + step), dtype=torch.int64)


def _peaked_logits(batch: int = 4) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn((batch, VOCAB), generator=gen) * 3.0


def _entropy(scores: torch.Tensor) -> torch.Tensor:
    p = torch.softmax(scores, dim=-1)
    return -(p * torch.log(p.clamp_min(1e-30))).sum(-1)


CLASSIC = SamplingConfig(top_k=40, temperature=1.0, temperature_start=10.0, temperature_decay_tokens=20)
CONSTANT = SamplingConfig(top_k=40, temperature=1.0)


def test_schedule_values_decay_linearly_to_target():
    assert temperature_at(0, CLASSIC) == 10.0
    assert temperature_at(10, CLASSIC) == pytest.approx(5.5)
    assert temperature_at(19, CLASSIC) == pytest.approx(1.45)
    assert temperature_at(20, CLASSIC) == 1.0
    assert temperature_at(500, CLASSIC) == 1.0
    assert temperature_at(0, CONSTANT) == 1.0


def test_schedule_really_flattens_the_distribution_at_early_steps():
    logits = _peaked_logits()
    with_schedule = SeededSampler(CLASSIC, _layout(4)).warp(_ids_at_step(0), logits)
    without = SeededSampler(CONSTANT, _layout(4)).warp(_ids_at_step(0), logits)
    # Same top-40 support, but T=10 spreads the mass over it.
    assert torch.equal(torch.isfinite(with_schedule), torch.isfinite(without))
    assert (_entropy(with_schedule) > _entropy(without) + 1.0).all()
    # Half way through the window it is still flatter than the target, but less so than at step 0.
    mid = SeededSampler(CLASSIC, _layout(4)).warp(_ids_at_step(10), logits)
    assert (_entropy(mid) < _entropy(with_schedule)).all() and (_entropy(mid) > _entropy(without)).all()


def test_schedule_has_no_effect_after_the_window():
    logits = _peaked_logits()
    for step in (20, 21, 100):
        with_schedule = SeededSampler(CLASSIC, _layout(4)).warp(_ids_at_step(step), logits)
        without = SeededSampler(CONSTANT, _layout(4)).warp(_ids_at_step(step), logits)
        assert torch.equal(with_schedule, without)


def test_schedule_changes_what_is_sampled_at_step_zero():
    """End to end through the sampler: many seeds, the same logits, first token."""
    logits = _peaked_logits(1).expand(2000, VOCAB)
    seeds = np.arange(2000)
    drawn_hot = SeededSampler(CLASSIC, _layout(2000, seeds=seeds))(_ids_at_step(0, 2000), logits).argmax(1)
    drawn_cold = SeededSampler(CONSTANT, _layout(2000, seeds=seeds))(_ids_at_step(0, 2000), logits).argmax(1)
    top_share_hot = torch.bincount(drawn_hot).max().item() / 2000
    top_share_cold = torch.bincount(drawn_cold).max().item() / 2000
    assert top_share_hot < 0.5 * top_share_cold, (top_share_hot, top_share_cold)


def test_sampler_draws_from_the_warped_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -30.0, 0.5]])
    n = 20000
    sampling = SamplingConfig(top_k=None, temperature=1.0)
    sampler = SeededSampler(sampling, _layout(n, seeds=np.arange(n) * 7919 + 13))
    out = sampler(_ids_at_step(3, n), logits.expand(n, -1))
    assert torch.all((out == 0).sum(1) == 1) and torch.all(torch.isinf(out).sum(1) == 5)
    freq = torch.bincount(out.argmax(1), minlength=6).double() / n
    expected = torch.softmax(logits[0].double(), 0)
    assert torch.allclose(freq, expected, atol=0.015), (freq, expected)


def test_top_k_noise_shortcut_equals_full_vocabulary_draw():
    logits = _peaked_logits(64)
    layout = _layout(64, seeds=np.arange(64) + 1000)
    k40 = SeededSampler(SamplingConfig(top_k=40), layout)
    warped = k40.warp(_ids_at_step(5, 64), logits)
    short = k40.choose(_ids_at_step(5, 64), warped)
    k40.top_k = None  # same warped scores, noise over the whole vocabulary
    full = k40.choose(_ids_at_step(5, 64), warped)
    assert torch.equal(short, full)


def test_counter_noise_is_a_pure_function_of_seed_step_and_token():
    seeds = torch.tensor([0, 1, -5, 2**62], dtype=torch.int64)
    tokens = torch.arange(1000).unsqueeze(0)
    a = counter_uniform(seeds, 3, tokens)
    b = counter_uniform(seeds.flip(0), 3, tokens).flip(0)  # other batch order
    assert torch.equal(a, b)
    assert not torch.equal(a, counter_uniform(seeds, 4, tokens))
    assert ((a > 0) & (a < 1)).all()
    assert abs(float(a.mean()) - 0.5) < 0.02
    # Pinned values: changing the hash would silently change every stored sample.
    pinned = counter_uniform(torch.tensor([42]), 7, torch.tensor([[0, 1, 2]]))
    assert torch.allclose(pinned, torch.tensor([[0.3650828, 0.8809321, 0.4343269]], dtype=torch.float64), atol=1e-6)


def test_same_seed_same_token_different_seed_differs():
    logits = torch.zeros((1, VOCAB)).expand(200, VOCAB)
    seeds = np.repeat([11, 12], 100)
    out = SeededSampler(CONSTANT, _layout(200, seeds=seeds))(_ids_at_step(0, 200), logits).argmax(1)
    assert len(torch.unique(out[:100])) == 1 and len(torch.unique(out[100:])) == 1
    assert out[0] != out[100]


def test_repetition_penalty_ignores_left_padding():
    pad = 7
    scores = torch.tensor([[1.0, -1.0, 2.0, 0.5, 0.0, 0.0, 0.0, 3.0]]).repeat(2, 1)
    padded = torch.tensor([[pad, pad, 0, 1], [pad, pad, pad, 0]])
    out = apply_repetition_penalty(scores, padded, 2.0, torch.tensor([2, 3]))
    assert out[0].tolist() == [0.5, -2.0, 2.0, 0.5, 0.0, 0.0, 0.0, 3.0]
    assert out[1].tolist() == [0.5, -1.0, 2.0, 0.5, 0.0, 0.0, 0.0, 3.0]  # token 7 only padding: untouched


def test_sampling_settings_are_validated():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="temperature_decay_tokens"):
        SamplingConfig(temperature_start=10.0, temperature_decay_tokens=0)


# -- with the real tiny model ------------------------------------------------------------
@pytest.fixture(scope="module")
def backend(demo_assets):
    from extraction_audit.generate.backends import BackendSpec, get_backend

    spec = BackendSpec("hf", str(demo_assets.model_dir), str(demo_assets.tokenizer_dir), "float32", "cpu",
                       CLASSIC.model_copy(update={"max_new_tokens": 24}).model_dump_json())
    return get_backend(spec)


def test_same_seed_reproduces_the_sample_whatever_the_batch(backend):
    tok = backend.tokenizer
    prompts = [np.asarray(tok("The bank said", add_special_tokens=False)["input_ids"]),
               np.asarray([tok.bos_token_id]),
               np.asarray(tok("Dear customer, thank you for", add_special_tokens=False)["input_ids"])]
    seeds = np.array([101, 202, 303])
    together = backend.generate(prompts, seeds, 24).rows()
    again = backend.generate(prompts, seeds, 24).rows()
    alone = [backend.generate([p], s[None], 24).rows()[0] for p, s in zip(prompts, seeds)]
    reordered = backend.generate(prompts[::-1], seeds[::-1], 24).rows()[::-1]
    for a, b, c, d in zip(together, again, alone, reordered):
        assert np.array_equal(a, b) and np.array_equal(a, c) and np.array_equal(a, d)
    other_seed = backend.generate([prompts[1]], np.array([999]), 24).rows()[0]
    assert not np.array_equal(other_seed, together[1])


def test_hf_backend_stops_at_end_of_text_and_excludes_it(backend):
    from extraction_audit.generate.backends.hf import cut_at_stop

    eos = backend.stop_ids[0]
    batch = cut_at_stop(np.array([[5, 6, eos, eos], [5, 6, 7, 8]]), [eos])
    assert batch.lengths.tolist() == [2, 4] and batch.stopped_at_eos.tolist() == [True, False]
    assert batch.values.tolist() == [5, 6, 5, 6, 7, 8]


def test_schedule_reaches_the_model_generate_path(demo_assets):
    """The decay must act inside ``generate`` (a processor built but never passed to
    ``generate`` is the classic silent no-op): first tokens spread out with it."""
    from extraction_audit.generate.backends import BackendSpec, get_backend

    def first_tokens(sampling):
        spec = BackendSpec("hf", str(demo_assets.model_dir), str(demo_assets.tokenizer_dir), "float32", "cpu",
                           sampling.model_dump_json())
        backend = get_backend(spec)
        prompts = [np.asarray([backend.tokenizer.bos_token_id])] * 400
        out = backend.generate(prompts, np.arange(400), 1)
        return np.asarray([r[0] if len(r) else -1 for r in out.rows()])

    hot, cold = first_tokens(CLASSIC), first_tokens(CONSTANT)
    top_share = [np.bincount(x + 1).max() / len(x) for x in (hot, cold)]
    assert top_share[0] < 0.6 * top_share[1], top_share
    assert len(set(hot.tolist())) > len(set(cold.tolist()))


def test_batches_share_one_max_new_tokens_and_respect_the_size():
    from extraction_audit.generate.worker import batch_slices

    max_new = np.array([64, 256, 64, 64, 256, 64, 64])
    lengths = np.array([3, 1, 9, 1, 2, 5, 2])
    batches = batch_slices(max_new, lengths, 3)
    assert sorted(np.concatenate(batches).tolist()) == list(range(7))
    assert all(len(b) <= 3 and len(set(max_new[b])) == 1 for b in batches)
    assert [lengths[b].tolist() for b in batches if max_new[b[0]] == 64] == [[1, 2, 3], [5, 9]]


def test_vllm_backend_missing_is_a_clear_error():
    try:
        import vllm  # noqa: F401
        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    from extraction_audit.errors import UserFacingError
    from extraction_audit.generate.backends import BackendSpec, get_backend

    with pytest.raises(UserFacingError, match="vLLM is not installed"):
        get_backend(BackendSpec("vllm", "m", "t", "auto", "cpu", CONSTANT.model_dump_json()))


def test_gpu_resource_profile_asks_one_gpu_per_task(spark):
    from extraction_audit.config import GenerationConfig
    from extraction_audit.generate.job import _resource_profile

    assert _resource_profile(GenerationConfig()) is None
    profile = _resource_profile(GenerationConfig(task_gpus=1, task_cpus=4))
    assert profile.taskResources["gpu"].amount == 1.0 and profile.taskResources["cpus"].amount == 4

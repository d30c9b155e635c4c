"""The grouped CPU LoRA wrapper computes what vLLM's own CPU wrapper computes.

Both wrappers get the same step (adapter slots per token, prefill or decode) and the same stacked
weights; `add_lora_linear` (shrink then expand over output slices, as vLLM's linear layers call it)
must give the same result. Tokens without an adapter (-1) get no LoRA term: the reference indexes
the last slot for them, so the last slot is left empty here, as it is unless every slot is used.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from vllm.lora.layers import LoRAMapping
from vllm.lora.punica_wrapper.punica_cpu import PunicaWrapperCPU

from serve.engine.cpulora import GroupedPunicaWrapperCPU, expand, shrink, token_groups

MAX_LORAS = 4
RANK = 8
HIDDEN = 48
SLICES = (48, 16, 16)  # a fused qkv projection's output slices


def _wrappers(slots: list[int], prefill: bool) -> tuple[PunicaWrapperCPU, GroupedPunicaWrapperCPU]:
    mapping = LoRAMapping(index_mapping=tuple(s + 1 for s in slots), prompt_mapping=tuple(s + 1 for s in slots),
                          is_prefill=prefill)
    index_to_id: list[int | None] = [1, 2, 3, None]  # adapter id k sits in slot k-1; slot 3 is empty
    pair = (PunicaWrapperCPU(256, 64, "cpu"), GroupedPunicaWrapperCPU(256, 64, "cpu"))
    for wrapper in pair:
        wrapper.update_metadata(mapping, index_to_id, MAX_LORAS, 1000)
    return pair


def _weights(dtype: torch.dtype, seed: int) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    gen = torch.Generator().manual_seed(seed)
    a = tuple(torch.randn(MAX_LORAS, 1, RANK, HIDDEN, generator=gen).to(dtype) for _ in SLICES)
    b = tuple(torch.randn(MAX_LORAS, 1, width, RANK, generator=gen).to(dtype) for width in SLICES)
    for w in (*a, *b):
        w[MAX_LORAS - 1] = 0
    return a, b


def _run(wrapper: PunicaWrapperCPU, x: torch.Tensor, a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...],
         base: torch.Tensor) -> torch.Tensor:
    y = base.clone()
    wrapper.add_lora_linear(y, x, a, b, 0.5, SLICES)
    return y


@pytest.mark.parametrize("prefill", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_adapter_no_adapter_and_several_in_one_step(prefill: bool, dtype: torch.dtype) -> None:
    slots = [0] * 5 + [-1] * 3 + [2] * 4 + [0] * 2 + [1] * 6
    reference, grouped = _wrappers(slots, prefill)
    a, b = _weights(dtype, seed=1)
    x = torch.randn(len(slots), HIDDEN).to(dtype)
    base = torch.randn(len(slots), sum(SLICES)).to(dtype)
    expected, got = _run(reference, x, a, b, base), _run(grouped, x, a, b, base)
    tolerance = 1e-5 if dtype is torch.float32 else 2e-2
    torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance)
    no_adapter = torch.tensor([s < 0 for s in slots])
    assert torch.equal(got[no_adapter], base[no_adapter])  # no LoRA term at all, not a near-zero one
    assert not torch.allclose(got[~no_adapter], base[~no_adapter])  # the adapters did act


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-1, MAX_LORAS - 2), min_size=1, max_size=40), st.booleans(), st.integers(0, 10**6))
def test_any_step_matches_vllm_float32(slots: list[int], prefill: bool, seed: int) -> None:
    reference, grouped = _wrappers(slots, prefill)
    a, b = _weights(torch.float32, seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(len(slots), HIDDEN, generator=gen)
    base = torch.randn(len(slots), sum(SLICES), generator=gen)
    torch.testing.assert_close(_run(grouped, x, a, b, base), _run(reference, x, a, b, base), rtol=1e-5, atol=1e-5)


def test_groups_are_computed_per_step() -> None:
    assert token_groups(torch.tensor([2, 2, 2])) == [(2, None)]
    groups = token_groups(torch.tensor([1, -1, 1, 0]))
    assert [(slot, rows.tolist()) for slot, rows in groups if rows is not None] == [(-1, [1]), (0, [3]), (1, [0, 2])]
    assert token_groups(torch.tensor([], dtype=torch.long)) == []


def test_a_tokens_lora_term_in_bfloat16_does_not_depend_on_the_rest_of_the_batch() -> None:
    """Batches differ from run to run (what else is in flight); a bfloat16 engine replays the same
    answers only if a token's shrink and expand give the same bits in a batch of 1, 3 or 40
    (at the served model's width: a float32 shrink there differs between 1, 2-3 and 4+ rows)."""
    gen = torch.Generator().manual_seed(3)
    hidden, out = 576, 1536
    a = torch.randn(MAX_LORAS, 1, RANK, hidden, generator=gen).to(torch.bfloat16)
    b = torch.randn(MAX_LORAS, 1, out, RANK, generator=gen).to(torch.bfloat16)
    x = torch.randn(40, hidden, generator=gen).to(torch.bfloat16)
    first_rows = []
    for size in (1, 3, 40):
        groups = token_groups(torch.ones(size, dtype=torch.long))
        mid = torch.zeros(size, RANK)
        y = torch.zeros(size, out, dtype=torch.bfloat16)
        shrink(x[:size], a, mid, groups, 2.0)
        expand(mid, b, y, groups, 0, None, True)
        first_rows.append((mid[0], y[0]))
    for mid, y in first_rows[1:]:
        assert torch.equal(mid, first_rows[0][0]) and torch.equal(y, first_rows[0][1])


def test_rows_that_are_not_the_steps_tokens_go_to_vllms_own_op() -> None:
    """vLLM's expand broadcasts a single input row over the batch; the grouped path does not
    handle that shape and hands it to vLLM's op, with the same result."""
    reference, grouped = _wrappers([0, 0, 2], prefill=False)
    _, b = _weights(torch.float32, seed=5)
    x = torch.randn(1, RANK)
    expected, got = torch.zeros(3, SLICES[0]), torch.zeros(3, SLICES[0])
    reference._expand_decode(expected, x, b[0], True)
    grouped._expand_decode(got, x, b[0], True)
    assert torch.equal(got, expected) and bool(expected.abs().sum() > 0)

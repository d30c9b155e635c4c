"""LoRA on vLLM's CPU backend with one matmul per adapter in the batch, not one per token.

vLLM's CPU punica ops (`vllm.lora.ops.torch_ops`) gather a copy of the adapter's weights for
every token (`weights[indices]`, then a batched mat-vec). A 512-token prefill chunk of a rank-16
adapter on SmolLM2's MLP takes 14-44 ms per projection that way and 0.3-0.5 ms as one matmul
(`scripts/bench_cpu_lora.py`), so an adapter request ran at a third of the base model's rate.
Tokens of one request share one adapter, and a step holds at most `max_loras` of them: this
wrapper groups the step's tokens by adapter once, in `update_metadata`, and does each group's
shrink (x @ A^T, scaled) and expand (@ B^T) as one matmul.

Index -1 means "no adapter" (vLLM's GPU kernels skip it); such tokens get no LoRA term here,
where vLLM's CPU ops would index the last slot, which holds zeros unless every slot is in use.

vLLM uses it through the platform plugin in `serve.engine.vllm_plugins`.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.lora.punica_wrapper.punica_cpu import PunicaWrapperCPU

# (adapter slot, the rows of the batch that use it; None when every row does)
Groups = list[tuple[int, torch.Tensor | None]]


def token_groups(indices: torch.Tensor) -> Groups:
    """The batch's tokens grouped by adapter slot, computed once per step."""
    if indices.numel() == 0:
        return []
    first = int(indices[0])
    if bool((indices == first).all()):
        return [(first, None)]
    return [(int(slot), torch.nonzero(indices == slot).squeeze(1)) for slot in torch.unique(indices)]


def _stacked(weights: torch.Tensor) -> torch.Tensor:
    """vLLM stacks adapter weights as [slot, 1, out, in] (or [slot, out, in])."""
    return weights.squeeze(1) if weights.dim() == 4 else weights


def shrink(x: torch.Tensor, weights: torch.Tensor, y: torch.Tensor, groups: Groups, scale: float) -> None:
    """y[:, :rank] = scale * x @ A[slot]^T per group (vLLM's bgmv_shrink).

    The matmul runs in the model's dtype, not in y's (float32): a bfloat16 matmul gives each row the
    same bits however many rows share it, a float32 one does not (sgemm picks its kernel by row
    count), and batches differ from run to run, so a bfloat16 engine replays deterministically."""
    a = _stacked(weights)
    rank = a.shape[1]
    for slot, rows in groups:
        if slot < 0:
            y[rows if rows is not None else slice(None), :rank] = 0
        elif rows is None:
            y[:, :rank] = scale * (x @ a[slot].to(x.dtype).t()).to(y.dtype)
        else:
            y[rows, :rank] = scale * (x[rows] @ a[slot].to(x.dtype).t()).to(y.dtype)


def expand(x: torch.Tensor, weights: torch.Tensor, y: torch.Tensor, groups: Groups, offset: int, width: int | None,
           add: bool) -> None:
    """y[:, offset:offset+width] (+)= x @ B[slot]^T per group, in y's dtype (vLLM's bgmv_expand_slice);
    width None: the columns y and B have in common (vLLM's bgmv_expand)."""
    b = _stacked(weights)
    if width is None:
        width = min(b.shape[1], y.shape[1])
    x = x.to(y.dtype)
    for slot, rows in groups:
        picked = slice(None) if rows is None else rows
        if slot < 0:
            if not add:
                y[picked, offset:offset + width] = 0
            continue
        out = (x if rows is None else x[rows]) @ b[slot].to(y.dtype).t()
        if add:
            y[picked, offset:offset + width] += out[:, :width]
        else:
            y[picked, offset:offset + width] = out[:, :width]


class GroupedPunicaWrapperCPU(PunicaWrapperCPU):
    """vLLM's CPU wrapper with the six per-token ops replaced by grouped ones; a batch whose rows
    do not match the step's tokens (not seen in vLLM's linear layers) goes to vLLM's own op."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._groups: Groups = []

    def update_metadata(self, *args: Any, **kwargs: Any) -> None:
        super().update_metadata(*args, **kwargs)
        self._groups = token_groups(self.token_lora_indices)

    def _grouped(self, x: torch.Tensor, y: torch.Tensor) -> bool:
        rows = self.token_lora_indices.shape[0]
        return bool(x.shape[0] == rows == y.shape[0])

    def _shrink_prefill(self, y: torch.Tensor, x: torch.Tensor, w_t_all: torch.Tensor, scale: float) -> None:
        if self.no_lora:
            return
        if self._grouped(x, y):
            shrink(x, w_t_all, y, self._groups, scale)
        else:
            super()._shrink_prefill(y, x, w_t_all, scale)

    def _shrink_decode(self, y: torch.Tensor, x: torch.Tensor, w_t_all: torch.Tensor, scale: float) -> None:
        if self._grouped(x, y):
            shrink(x, w_t_all, y, self._groups, scale)
        else:
            super()._shrink_decode(y, x, w_t_all, scale)

    def _expand_prefill(self, y: torch.Tensor, x: torch.Tensor, w_t_all: torch.Tensor, add_inputs: bool) -> None:
        if self.no_lora:
            return
        if self._grouped(x, y):
            expand(x, w_t_all, y, self._groups, 0, None, add_inputs)
        else:
            super()._expand_prefill(y, x, w_t_all, add_inputs)

    def _expand_decode(self, y: torch.Tensor, x: torch.Tensor, w_t_all: torch.Tensor, add_inputs: bool) -> None:
        if self._grouped(x, y):
            expand(x, w_t_all, y, self._groups, 0, None, add_inputs)
        else:
            super()._expand_decode(y, x, w_t_all, add_inputs)

    def _expand_slice_prefill(self, y: torch.Tensor, x: torch.Tensor, w_t_all: torch.Tensor, y_offset: int,
                              y_slice_size: int, add_inputs: bool) -> None:
        if self.no_lora:
            return
        if self._grouped(x, y):
            expand(x, w_t_all, y, self._groups, y_offset, y_slice_size, add_inputs)
        else:
            super()._expand_slice_prefill(y, x, w_t_all, y_offset, y_slice_size, add_inputs)

    def _expand_slice_decode(self, y: torch.Tensor, x: torch.Tensor, w_t_all: torch.Tensor, y_offset: int,
                             y_slice_size: int, add_inputs: bool) -> None:
        if self._grouped(x, y):
            expand(x, w_t_all, y, self._groups, y_offset, y_slice_size, add_inputs)
        else:
            super()._expand_slice_decode(y, x, w_t_all, y_offset, y_slice_size, add_inputs)

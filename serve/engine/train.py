"""Seeded CPU LoRA training of the demo's candidate adapters (001's S1 experiment in miniature).

Two arms, as in S1: `recovery` trains only on verified-recovery decisions (S1's Q-only arm was
targeted at recovery), `mix` on the same number of examples drawn evenly from every stratum.
Examples are rendered with the engine's own chat template (tools in the system turn, the call
as a Hermes `<tool_call>` block), so the adapter learns the exact text the engine prompts with;
the loss covers only the answer tokens. (Under `tool_choice: "required"` vLLM constrains the
output to a JSON list `[{"name": ..., "parameters": ...}]` instead; the tool choice learned in
the Hermes form carries over to it.)

CPU budget: every prompt starts with its workspace's system turn (the tool list, ~85% of the
tokens). Its key/value states are computed without gradient, under the adapter as it stands,
and each example runs only its own suffix over them: once per epoch for a system turn several
examples share, when the example runs for one of its own (a memory block makes it unique).
What is given up is the gradient through the system turn and, for shared ones, its drift
within an epoch.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from core.curated import TRAIN_JSONL, CuratedSetError, read_classes, read_curated
from core.jsonfile import JsonFileError, read_jsonl_strict
from core.records import TrainingExample
from serve.engine.adapters import TARGET_MODULES
from serve.engine.hfprogress import progress_bars
from serve.errors import ServeError

DEFAULT_TEMPLATE = Path(__file__).resolve().parents[2] / "configs" / "chat_templates" / "hermes-tools.jinja"
MARKER = "worker-tier-train.json"
NAME_OPENING = '{"name": "'  # where the chat template's tool call names its tool
Selection = Literal["recovery", "mix"]
SELECTIONS: dict[Selection, tuple[str, ...]] = {
    "recovery": ("verified_recovery",),
    "mix": ("verified_recovery", "clean_trajectory_action", "verified_action"),
}
# Sized so that a fresh `make demo` stays within its 10 minutes on 2 CPU cores of the slowest kind (AVX2
# only): 6 steps of 2 examples each, 28 s for both adapters on an idle AVX-512 Xeon against 46 s for 16
# examples (8 steps), 24 (12 steps) 28 s more again. The demo asks nothing of the candidates but that they are
# real and trained, and on 12 `recovery` still stops every repeat of a rejected call (BENCHMARKS.md, "The demo
# within its ten minutes on AVX2").
DEMO_EXAMPLES = 12
DEMO_EPOCHS = 1
DEMO_LR = 2e-3
DEMO_BATCH = 2
DEMO_MAX_LEN = 2048
DEMO_SEED = 0

PrefixStates = dict[tuple[int, ...], tuple[Any, ...]]
"""Key/value states of a token prefix (the system turn), computed once and shared across adapters."""


class TrainDataError(ServeError, ValueError):
    """A training file or example that cannot be used; the message names file:line."""


class TrainReport(BaseModel):
    """What one training run did; stored beside the adapter so a cached one can be explained."""

    model_config = ConfigDict(extra="forbid")
    examples: int
    skipped_too_long: int
    skipped: list[str] = []
    """The examples left out for length: each id with its token count (never truncated: see `train_adapter`)."""
    answer_tokens: int
    steps: int
    epochs: int
    batch_size: int
    seed: int
    rank: int
    alpha: int
    lr: float
    max_len: int
    decision_weight: float = 0.0
    threads: int
    seconds: float
    cpu_seconds: float  # with other work on the machine, wall time says little; this says more
    epoch_losses: list[float]  # mean answer-token loss per epoch, before each example's own update
    step_losses: list[float]

    @property
    def final_loss(self) -> float:
        """Mean loss of the last three steps: one step's loss swings with its two examples."""
        tail = self.step_losses[-3:]
        return sum(tail) / len(tail)

    def summary(self) -> str:
        return (f"{self.examples} examples, {self.steps} steps, answer loss {self.step_losses[0]:.3f} (first step) "
                f"-> {self.final_loss:.3f} (last steps), {self.seconds:.0f}s wall, {self.cpu_seconds:.0f}s CPU")


@dataclass(frozen=True)
class Encoded:
    """One example as token ids: a shared `prefix` (system turn), then the rest of the prompt
    and the answer in `suffix`; the last `answer_len` suffix tokens carry the loss."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    answer_len: int
    decision: tuple[int, int] = (0, 0)
    """The answer tokens that name the tool (start, end), counted from the answer's first token."""

    @property
    def length(self) -> int:
        return len(self.prefix) + len(self.suffix)


def load_training(path: Path) -> list[TrainingExample]:
    """Read a `train.jsonl` of `TrainingExample` lines; a bad line is an error with file:line."""
    try:
        out = read_jsonl_strict(path, TrainingExample, "a training example")
    except JsonFileError as exc:
        raise TrainDataError(str(exc)) from exc
    if not out:
        raise TrainDataError(f"{path}: no training examples")
    return out


def select_examples(examples: Sequence[TrainingExample], select: Selection, limit: int,
                    seed: int) -> list[TrainingExample]:
    """`limit` examples of the arm's strata, shuffled by `seed`, taken round-robin over strata
    so `mix` is balanced and `recovery` holds recoveries only."""
    if select not in SELECTIONS:
        raise TrainDataError(f"unknown selection {select!r}; choose one of {', '.join(SELECTIONS)}")
    rng = Random(seed)
    pools = []
    for stratum in SELECTIONS[select]:
        pool = [e for e in examples if e.stratum == stratum and e.answer.tool is not None]
        rng.shuffle(pool)
        pools.append(pool)
    out: list[TrainingExample] = []
    for i in range(max((len(p) for p in pools), default=0)):
        out.extend(p[i] for p in pools if i < len(p))
    if not out:
        raise TrainDataError(f"no training examples in the strata of {select!r}: {', '.join(SELECTIONS[select])}")
    return out[:limit]


@dataclass(frozen=True)
class ChatExample:
    """One example as training renders it: the prompt (its messages and tools) and the assistant turn it learns.
    A demo split's `TrainingExample` and a curated set's row (core/curated.py) both become one."""

    id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    turn: dict[str, Any]
    mix_class: str | None = None
    """A curated row's class of the mix (its provenance line); None for a demo split's example."""


def chat_example(example: TrainingExample | ChatExample) -> ChatExample:
    """A demo split's example as a chat example: its recorded call as the turn to learn."""
    if isinstance(example, ChatExample):
        return example
    if example.answer.tool is None:
        raise TrainDataError(f"{example.id}: a no-call answer has no text to train on")
    call = {"id": "call_0", "type": "function",
            "function": {"name": example.answer.tool, "arguments": json.dumps(example.answer.arguments)}}
    return ChatExample(example.id, list(example.request.messages), example.request.tools or None,
                       {"role": "assistant", "content": None, "tool_calls": [call]})


def curated_examples(directory: Path) -> tuple[list[ChatExample], dict[str, Any]]:
    """A curated set's rows as chat examples, and what the adapter's record says of the data: the policy, the
    manifest's sha256 and `train.jsonl`'s (a set changed after it was built is refused, naming the file)."""
    try:
        manifest, manifest_sha256, rows = read_curated(directory)
        classes = read_classes(directory, len(rows))
    except (CuratedSetError, JsonFileError) as exc:
        raise TrainDataError(str(exc)) from exc
    examples = [ChatExample(f"{directory.name}:{number}", row.messages[:-1], row.tools or None, row.messages[-1],
                            mix_class)
                for number, (row, mix_class) in enumerate(zip(rows, classes, strict=True), 1)]
    for example in examples:
        if example.turn.get("role") != "assistant":
            raise TrainDataError(f"{directory / TRAIN_JSONL}:{example.id.rpartition(':')[2]}: the last message is "
                                 "the turn to learn and must be the assistant's")
    return examples, {"path": str(directory), "manifest_sha256": manifest_sha256,
                      "train_sha256": manifest.train_sha256, "policy": manifest.policy.model_dump(),
                      "examples": manifest.examples}


def stratified(examples: Sequence[ChatExample], limit: int, seed: int) -> list[ChatExample]:
    """`limit` of a curated set's examples with each class in its share of the set (largest remainder; ties to
    the class first in the set), drawn within a class in an order `seed` fixes; kept in the set's order. A set is
    written scarcest class first, so its first rows would be all one class."""
    if limit >= len(examples):
        return list(examples)
    by_class: dict[str | None, list[ChatExample]] = {}
    for example in examples:
        by_class.setdefault(example.mix_class, []).append(example)
    exact = {c: limit * len(rows) / len(examples) for c, rows in by_class.items()}
    counts = {c: int(v) for c, v in exact.items()}
    for c in sorted(exact, key=lambda c: counts[c] - exact[c])[:limit - sum(counts.values())]:
        counts[c] += 1
    chosen: set[str] = set()
    for c, rows in by_class.items():
        order = list(rows)
        Random(f"{seed}:{c}").shuffle(order)
        chosen.update(e.id for e in order[:counts[c]])
    return [e for e in examples if e.id in chosen]


def render_example(tokenizer: Any, template: str, example: TrainingExample | ChatExample) -> tuple[str, str]:
    """(prompt, answer): the prompt as the engine renders it, and the assistant turn that follows,
    rendered by the same template, up to and including its end-of-turn token."""
    chat = chat_example(example)
    prompt = tokenizer.apply_chat_template(chat.messages, tools=chat.tools, chat_template=template,
                                           add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template([*chat.messages, chat.turn], tools=chat.tools, chat_template=template,
                                         tokenize=False)
    if not full.startswith(prompt):
        raise TrainDataError(f"{chat.id}: the template renders the answer turn differently from its prompt")
    return prompt, full[len(prompt):].removesuffix("\n")


def encode(tokenizer: Any, template: str, example: TrainingExample | ChatExample) -> Encoded:
    """Token ids of prompt and answer, the prompt tokenised whole as the engine does."""
    chat = chat_example(example)
    prompt, answer = render_example(tokenizer, template, chat)
    ids = tokenizer(prompt, add_special_tokens=False).input_ids
    system = tokenizer.apply_chat_template(chat.messages[:1], tools=chat.tools, chat_template=template,
                                           tokenize=False)
    head = tokenizer(system, add_special_tokens=False).input_ids
    cut = len(head) if ids[: len(head)] == head and len(head) < len(ids) else 0
    answer_ids = tokenizer(answer, add_special_tokens=False).input_ids
    decision = (0, 0)  # a template that names the tool otherwise: no tokens are weighted
    if (found := answer.find(NAME_OPENING)) >= 0:
        opening = found + len(NAME_OPENING)
        named = answer.find('"', opening)
        decision = (len(tokenizer(answer[:opening], add_special_tokens=False).input_ids),
                    len(tokenizer(answer[:named], add_special_tokens=False).input_ids))
    return Encoded(prefix=tuple(ids[:cut]), suffix=tuple(ids[cut:] + answer_ids), answer_len=len(answer_ids),
                   decision=decision)


def examples_sha256(examples: Iterable[TrainingExample]) -> str:
    """A hash of the examples in order, for the adapter's cache marker."""
    digest = hashlib.sha256()
    for example in examples:
        digest.update(json.dumps(example.model_dump(mode="json"), sort_keys=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def prefix_states(model: Any, prefixes: Iterable[tuple[int, ...]],
                   states: PrefixStates) -> PrefixStates:
    """Fill `states` with the key/value states of each prefix it lacks; returns it."""
    import torch

    with torch.no_grad():
        for prefix in prefixes:
            if prefix and prefix not in states:
                cache = model(torch.tensor([prefix]), use_cache=True).past_key_values
                states[prefix] = tuple((layer.keys, layer.values) for layer in cache.layers)
    return states


def answer_loss(model: Any, item: Encoded, states: PrefixStates, decision_weight: float = 0.0) -> Any:
    """Mean cross-entropy over the answer tokens, the prompt's system turn read from `states`
    (or computed for this example alone when `states` does not hold it). `decision_weight` adds
    that many times the mean loss of the tokens naming the tool: the few tokens that carry the
    choice are otherwise outweighed by the many argument tokens."""
    import torch
    from transformers import DynamicCache

    ids = torch.tensor([item.suffix])
    kwargs: dict[str, Any] = {}
    if item.prefix:
        cached = states.get(item.prefix) or prefix_states(model, [item.prefix], {})[item.prefix]
        kwargs["past_key_values"] = DynamicCache(ddp_cache_data=cached)
    logits = model(ids, logits_to_keep=item.answer_len + 1, use_cache=bool(item.prefix), **kwargs).logits
    targets = ids[0, -item.answer_len:]
    losses = torch.nn.functional.cross_entropy(logits[0, :-1].float(), targets, reduction="none")
    start, end = item.decision
    if decision_weight and end > start:
        return losses.mean() + decision_weight * losses[start:end].mean()
    return losses.mean()


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _lora_model(model_dir: Path, rank: int, alpha: int, quiet: bool) -> Any:
    """The base model in float32 with a fresh LoRA on `TARGET_MODULES`, in training mode; its A matrices come
    from torch's RNG, so the caller seeds it first. `quiet` hides the weight-loading bar."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    with progress_bars(not quiet):
        base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=TARGET_MODULES,
                        task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    model.train()
    return model


def train_adapter(model_dir: Path, examples: Sequence[TrainingExample | ChatExample], out_dir: Path, seed: int,
                  rank: int = 16, alpha: int = 32, epochs: int = DEMO_EPOCHS, lr: float = DEMO_LR,
                  max_len: int = DEMO_MAX_LEN, batch_size: int = DEMO_BATCH, chat_template: Path = DEFAULT_TEMPLATE,
                  label: str = "adapter", base_states: PrefixStates | None = None,
                  decision_weight: float = 0.0, on_step: Callable[[str], None] | None = progress) -> TrainReport:
    """Train a LoRA adapter on `examples` and save it with PEFT to `out_dir`.

    Deterministic in `seed` (LoRA initialisation and the per-epoch example order); examples
    longer than `max_len` tokens are skipped, counted and named with their lengths (`skipped`), never
    truncated: a cut prompt would teach the model to answer without its tools. `base_states`, when given, is
    filled with the base model's system-turn states and reused for the first epoch, so several adapters trained
    on one workspace set compute them once (PEFT starts B at zero: a fresh adapter is the base).
    `on_step` gets a line per optimiser step; None trains silently (no weight-loading bar either).
    """
    import torch
    from transformers import AutoTokenizer

    started, cpu_started = time.monotonic(), time.process_time()
    template = chat_template.read_text(encoding="utf-8")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    encoded = [encode(tokenizer, template, e) for e in examples]
    kept = [item for item in encoded if item.length <= max_len]
    skipped = [f"{chat_example(e).id} ({item.length} tokens)" for e, item in zip(examples, encoded, strict=True)
               if item.length > max_len]
    if not kept:
        raise TrainDataError(f"all {len(encoded)} examples are longer than --max-len {max_len} tokens (never "
                             f"truncated): {', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''}; "
                             "raise --max-len")
    torch.manual_seed(seed)
    model = _lora_model(model_dir, rank, alpha, quiet=on_step is None)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    per_epoch = math.ceil(len(kept) / batch_size)
    total = per_epoch * epochs
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / total)))
    # Only system turns that several examples share are kept (about 46 kB a token): a prompt with
    # its own memory block is computed when its example runs and dropped after.
    shared = [prefix for prefix, n in Counter(item.prefix for item in kept).items() if n > 1]
    order = Random(seed)
    step_losses: list[float] = []
    epoch_losses: list[float] = []
    for epoch in range(epochs):
        given = base_states if epoch == 0 and base_states is not None else {}
        states = prefix_states(model, shared, given)
        batch = list(kept)
        order.shuffle(batch)
        seen: list[float] = []
        for start in range(0, len(batch), batch_size):
            chunk = batch[start:start + batch_size]
            losses = []
            for item in chunk:
                loss = answer_loss(model, item, states, decision_weight)
                (loss / len(chunk)).backward()
                losses.append(loss.item())
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            step_losses.append(sum(losses) / len(losses))
            seen.extend(losses)
            if on_step is not None:
                on_step(f"{label}: epoch {epoch + 1}/{epochs} step {len(step_losses)}/{total} "
                        f"loss {step_losses[-1]:.4f} ({time.monotonic() - started:.0f}s)")
        epoch_losses.append(sum(seen) / len(seen))
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    return TrainReport(
        examples=len(kept), skipped_too_long=len(skipped), skipped=skipped,
        answer_tokens=sum(item.answer_len for item in kept), steps=total, epochs=epochs, batch_size=batch_size,
        seed=seed, rank=rank, alpha=alpha, lr=lr, max_len=max_len, decision_weight=decision_weight,
        threads=torch.get_num_threads(),
        seconds=round(time.monotonic() - started, 1), cpu_seconds=round(time.process_time() - cpu_started, 1),
        epoch_losses=epoch_losses, step_losses=step_losses,
    )


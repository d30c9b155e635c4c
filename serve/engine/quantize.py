"""Quantise a model directory (the embedded model, or a candidate merged with its adapter) into a checkpoint
the pinned vLLM CPU backend serves, so `quantisation_survives` is judged on a real quantised endpoint.

Production quantises to NVFP4 on GPUs; vLLM's CPU backend has no FP4 kernels. Of what was tried on it
(BENCHMARKS.md, quantised checkpoints), two compressed-tensors schemes are offered, both written here with
torch and safetensors alone (round to nearest, symmetric weights, no calibration data) in the layout vLLM's
compressed-tensors loader reads:

* `w8a8-int8`, the one the gate uses: int8 weights, one scale per output channel (`format = "int-quantized"`);
  activations quantised to int8 per token at run time, asymmetrically, which makes vLLM run oneDNN's int8
  matmul on every CPU, in float32 and in bfloat16 alike.
* `w4a16`: int4 weights, one scale per 32 inputs of each output channel, packed eight to an int32
  (`format = "pack-quantized"`); vLLM's CPU int4 kernel, in bfloat16 only. Closer to NVFP4's 4-bit weights,
  and far from the unquantised model's answers on a model of 135M parameters.

Either is served without LoRA (`configs/engine/cpu-smollm2-quantized.toml`): vLLM 0.32's LoRA layers read each
linear layer's `weight`, which the oneDNN kernel releases. Only the decoder's linear projections are quantised;
the embeddings (and the tied head), the norms and the rest are copied as they are. The output is cached like the
embedded model: a marker file names the source's sha256 and the scheme, so a second call with the same source
and scheme does nothing. The marker also names what the checkpoint derives from (`derived_from`: the adapter a
merged source folds in, by fingerprint, over its base's digest; else the source itself as the base), which the
gateway serves as the endpoint's identity and `quantisation_survives` binds the quantised run to.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.lineage import QUANTIZE_RECORD, LineageError, derived_from, model_sha256
from core.names import excerpt
from serve.engine.modelbuild import cache_dir, check_model_dir
from serve.engine.outdir import marker_key, replaced_whole
from serve.errors import ServeError

MARKER = QUANTIZE_RECORD
FORMAT_VERSION = 2
"""Part of the cache key: a change to what a scheme writes bumps it, so older outputs are rebuilt (2: the record
names what the checkpoint derives from)."""
ARCHITECTURES = ("LlamaForCausalLM",)
"""What this quantiser knows the linear layers of; another architecture is refused, not guessed at."""
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The decoder's linear layers (vLLM's `Linear` target); every other tensor is copied unchanged."""
INDEX = "model.safetensors.index.json"
NOT_COPIED = frozenset({"config.json", INDEX})


@dataclass(frozen=True)
class Scheme:
    """One quantisation scheme the CPU engine serves, as compressed-tensors describes it."""

    name: str
    bits: int
    group_size: int | None
    """Inputs sharing one scale; None: one scale per output channel."""
    dynamic_int8_activations: bool
    """Activations quantised to int8 per token at run time (W8A8), else left in the engine's dtype."""
    summary: str

    @property
    def format(self) -> str:
        return "int-quantized" if self.bits == 8 else "pack-quantized"

    def quantization_config(self) -> dict[str, Any]:
        """config.json's `quantization_config`, field for field as compressed-tensors writes it."""
        weights = _args(self.bits, "channel" if self.group_size is None else "group", self.group_size, dynamic=False)
        # Asymmetric activations: vLLM then runs oneDNN's int8 matmul on every CPU, in float32 or bfloat16. Symmetric
        # ones take the AMX kernel where the CPU has AMX, which refuses float32 (BENCHMARKS.md).
        inputs = _args(8, "token", None, dynamic=True, symmetric=False) if self.dynamic_int8_activations else None
        return {
            "quant_method": "compressed-tensors",
            "format": self.format,
            "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": inputs,
                                          "output_activations": None, "format": None}},
            "ignore": ["lm_head"],
            "kv_cache_scheme": None,
            "global_compression_ratio": None,
        }


def _args(bits: int, strategy: str, group_size: int | None, *, dynamic: bool, symmetric: bool = True
          ) -> dict[str, Any]:
    return {"num_bits": bits, "type": "int", "symmetric": symmetric, "group_size": group_size, "strategy": strategy,
            "block_structure": None, "dynamic": dynamic, "actorder": None, "scale_dtype": None, "zp_dtype": None,
            "observer": None if dynamic else "memoryless_minmax", "observer_kwargs": {}}


SCHEMES: dict[str, Scheme] = {scheme.name: scheme for scheme in (
    Scheme("w8a8-int8", 8, None, True, "int8 weights per output channel, int8 activations per token; "
                                       "float32 or bfloat16"),
    Scheme("w4a16", 4, 32, False, "int4 weights in groups of 32 inputs; bfloat16 engines only"),
)}
NOT_SERVED = {
    "nvfp4": "production's NVFP4 needs an NVIDIA Blackwell GPU; vLLM's CPU backend has no FP4 kernels",
    "gptq": "the GPTQ layout serves on the CPU engine in bfloat16 only and, without calibration data, holds the "
            "same weights as w4a16 (the same answers): use w4a16",
    "awq": "the AWQ layout serves on the CPU engine in bfloat16 only and, without calibration data, holds the "
           "same weights as w4a16 (the same answers): use w4a16",
    "w8a16": "vLLM's CPU weight-only kernel takes 4-bit weights only",
    "w4a8": "vLLM's CPU int4 x int8 kernel for it served 2-4 tokens/s, several times slower than the unquantised model",
}
"""What was tried on the CPU engine and why it is not offered (BENCHMARKS.md, quantised checkpoints)."""


class QuantizeError(ServeError, ValueError):
    """A scheme the CPU engine cannot serve, or a source that cannot be quantised; nothing was written."""


@dataclass(frozen=True)
class QuantizeResult:
    out_dir: Path
    scheme: str
    built: bool  # False when a cached checkpoint of the same source and scheme was already there
    source_sha256: str
    tensors: int  # weights quantised


def default_out(model_dir: Path, scheme: str, root: Path | None = None) -> Path:
    """Where `worker-serve model quantize` writes without --out: beside the embedded model in the cache
    (`<cache>/models/<model's directory name>-<scheme>`), where cpu-smollm2-quantized.toml looks."""
    return (root or cache_dir()) / "models" / f"{model_dir.name}-{scheme}"


def check_scheme(scheme: str) -> Scheme:
    """The scheme named `scheme`, or a QuantizeError naming the schemes the CPU engine serves."""
    if scheme in SCHEMES:
        return SCHEMES[scheme]
    served = ", ".join(f"{s.name} ({s.summary})" for s in SCHEMES.values())
    why = NOT_SERVED.get(scheme.lower())
    lead = f"scheme {excerpt(scheme)}: {why}" if why else f"unknown scheme {excerpt(scheme)}"
    raise QuantizeError(f"{lead}; the CPU engine serves {served}")


def _read_config(model_dir: Path) -> dict[str, Any]:
    check_model_dir(model_dir)
    config: dict[str, Any] = json.loads((model_dir / "config.json").read_bytes().decode("utf-8"))
    if "quantization_config" in config:
        raise QuantizeError(f"{model_dir} is already quantised (its config.json has a quantization_config); "
                            "quantise the unquantised (merged) model")
    architectures = config.get("architectures")
    if not isinstance(architectures, list) or not any(a in ARCHITECTURES for a in architectures):
        raise QuantizeError(f"{model_dir}: architecture {excerpt(architectures)} is not one this quantiser knows "
                            f"the linear layers of ({', '.join(ARCHITECTURES)})")
    return config


def _shards(model_dir: Path) -> list[str]:
    """The safetensors files holding the weights, as the index names them (or the single file)."""
    index = model_dir / INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_bytes().decode("utf-8"))["weight_map"]
            return sorted(set(weight_map.values()))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise QuantizeError(f"{index}: not a safetensors index ({excerpt(str(exc))})") from None
    if (model_dir / "model.safetensors").is_file():
        return ["model.safetensors"]
    raise QuantizeError(f"{model_dir}: no model.safetensors (a merged model is saved with safe_serialization)")


def is_projection(name: str, shape: tuple[int, ...]) -> bool:
    """A decoder projection's weight: what vLLM builds as a quantised `Linear` layer."""
    parts = name.split(".")
    return len(shape) == 2 and parts[-1] == "weight" and len(parts) > 1 and parts[-2] in PROJECTIONS


def quantize_weight(weight: Any, scheme: Scheme) -> dict[str, Any]:
    """A [out, in] weight as the tensors compressed-tensors stores for it, keyed by suffix: round to nearest,
    symmetric, the scale the largest magnitude of its channel (or group) over the largest integer."""
    import torch

    out_features, in_features = weight.shape
    group = in_features if scheme.group_size is None else scheme.group_size
    if in_features % group:
        raise QuantizeError(f"{in_features} inputs do not split into groups of {group}")
    qmax = 2 ** (scheme.bits - 1) - 1
    grouped = weight.float().reshape(out_features, in_features // group, group)
    scale = grouped.abs().amax(dim=-1).clamp(min=torch.finfo(torch.float32).tiny) / qmax
    values = torch.round(grouped / scale[..., None]).clamp(-qmax - 1, qmax).reshape(out_features, in_features)
    if scheme.bits == 8:
        return {"weight": values.to(torch.int8), "weight_scale": scale}
    return {"weight_packed": pack_int32(values.to(torch.int32), scheme.bits), "weight_scale": scale,
            "weight_shape": torch.tensor([out_features, in_features], dtype=torch.int64)}


def pack_int32(values: Any, bits: int) -> Any:
    """Signed `bits`-bit values [rows, cols] packed along the columns, 32 // bits to an int32, lowest bits first,
    each offset by 2**(bits-1) to be unsigned (compressed-tensors' `pack_to_int32`)."""
    import torch

    per_word = 32 // bits
    rows, cols = values.shape
    if cols % per_word:
        raise QuantizeError(f"{cols} inputs do not pack {per_word} to an int32")
    unsigned = (values.to(torch.int64) + (1 << (bits - 1))).reshape(rows, cols // per_word, per_word)
    shifts = torch.arange(per_word, dtype=torch.int64) * bits
    words = (unsigned << shifts).sum(dim=-1)
    return torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)


def _write(source: Path, staging: Path, config: dict[str, Any], scheme: Scheme) -> int:
    """Write the quantised checkpoint into `staging`; returns how many weights were quantised."""
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import save_file

    quantized = 0
    weight_map: dict[str, str] = {}
    for shard in _shards(source):
        tensors: dict[str, Any] = {}
        try:
            with safe_open(source / shard, framework="pt") as fh:
                metadata = fh.metadata() or {"format": "pt"}
                for name in fh.keys():  # noqa: SIM118 — safe_open is no mapping
                    tensor = fh.get_tensor(name)
                    if not is_projection(name, tuple(tensor.shape)):
                        tensors[name] = tensor
                        continue
                    base = name.removesuffix(".weight")
                    try:
                        parts = quantize_weight(tensor, scheme)
                    except QuantizeError as exc:
                        raise QuantizeError(f"{source / shard}: {name}: {exc}; scheme {scheme.name} "
                                            "does not fit this model") from None
                    tensors.update({f"{base}.{suffix}": value for suffix, value in parts.items()})
                    quantized += 1
        except (SafetensorError, OSError) as exc:
            raise QuantizeError(f"{source / shard}: not a readable safetensors file ({excerpt(str(exc))})") from None
        save_file(tensors, str(staging / shard), metadata=metadata)
        weight_map.update(dict.fromkeys(tensors, shard))
    if not quantized:
        raise QuantizeError(f"{source}: no decoder projections ({', '.join(PROJECTIONS)}) to quantise")
    if (source / INDEX).is_file():
        index = json.loads((source / INDEX).read_bytes().decode("utf-8"))
        index["weight_map"] = dict(sorted(weight_map.items()))
        (staging / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    for path in sorted(source.iterdir()):
        # Not the source's own records (worker-tier-build.json and the like): they describe the source.
        if path.is_file() and path.name not in NOT_COPIED and not path.name.endswith(".safetensors") \
                and not path.name.startswith("worker-tier-"):
            shutil.copy2(path, staging / path.name)
    config = {**config, "quantization_config": scheme.quantization_config()}
    (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return quantized


def quantize_model(source_dir: Path, out_dir: Path, scheme: str) -> QuantizeResult:
    """Write `source_dir` quantised with `scheme` to `out_dir`, whole or not at all (a staging directory renamed
    over it). An unserved scheme is refused before anything is read or written; a complete output of the same
    source (by sha256) and scheme is reused as it is."""
    chosen = check_scheme(scheme)
    source, out = source_dir.resolve(), out_dir.resolve()
    if out == source or source in out.parents:
        raise QuantizeError(f"--out {out_dir} is inside the model it quantises ({source_dir})")
    config = _read_config(source)
    marker = out / MARKER
    if out.exists() and not out.is_dir():
        raise QuantizeError(f"--out {out_dir} exists and is not a directory")
    if out.is_dir() and not marker.is_file() and any(out.iterdir()):
        raise QuantizeError(f"--out {out_dir} holds files this command did not write; give a new or empty "
                            "directory (an earlier quantised checkpoint is replaced)")
    digest = model_sha256(source)
    try:
        lineage = derived_from(source, digest)
    except LineageError as exc:
        raise QuantizeError(str(exc)) from None
    key = f"{chosen.name}:{digest}:{FORMAT_VERSION}"
    if marker_key(marker) == key:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
        return QuantizeResult(out, chosen.name, False, digest, int(recorded.get("tensors", 0)))
    started = time.monotonic()
    try:
        with replaced_whole(out) as staging:
            tensors = _write(source, staging, config, chosen)
            record = {"key": key, "scheme": chosen.name, "source": str(source), "source_sha256": digest,
                      "derived_from": lineage.model_dump(mode="json"), "format_version": FORMAT_VERSION,
                      "tensors": tensors,
                      "quantization_config": chosen.quantization_config(),
                      "seconds": round(time.monotonic() - started, 1)}
            (staging / MARKER).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        raise QuantizeError(f"{out_dir}: cannot write the quantised model ({exc.strerror or exc})") from None
    return QuantizeResult(out, chosen.name, True, digest, tensors)

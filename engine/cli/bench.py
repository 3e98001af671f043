"""``fireside bench``: measure an OpenAI-compatible server, or Fireside's own engine, the way
``vllm bench serve`` does, and print the figures as a table (``--json`` and ``--plot`` save them).

    fireside bench                                  # the local Fireside server, its first model
    fireside bench --base-url http://gpu-box:8000 --model meta-llama/Llama-3.1-8B-Instruct
    fireside bench --local starter --concurrency 1,2,4

With no ``--base-url`` it measures the Fireside server this machine runs (with the API key from the
OS keyring, if one is set). ``--local MODEL`` loads the model into an engine in this process and
measures the engine without any server in between.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import httpx

from ..bench import (
    BenchConfig,
    BenchError,
    BenchReport,
    HttpTarget,
    LevelResult,
    LocalTarget,
    Stat,
    run_sweep,
    write_json,
    write_plot,
)
from ..settings import Settings
from .fmt import table
from .models import add_load_options, load_options

HEADER = ["CONC", "OK", "FAIL", "TOKENS GIVEN/ASKED", "TOK/S", "REQ/S",
          "TTFT ms p50/p90/p99", "TPOT ms p50/p90/p99", "ITL ms p50/p90/p99"]


def _pcts(stat: Stat) -> str:
    return "/".join(_ms(v) for v in (stat.p50, stat.p90, stat.p99))


def _ms(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def format_table(report: BenchReport) -> str:
    """The report as text: a heading, one row per level, then the notes."""
    cfg = report.config
    source = f"prompts from {cfg.prompt_file}" if cfg.prompt_file else f"random {cfg.input_len}-word prompts"
    lines = [f"{report.target}  model {report.model or '?'}  ({report.endpoint}; {source}, "
             f"{cfg.output_len} output tokens, {cfg.num_prompts} requests per level, seed {cfg.seed})", ""]
    rows = [[str(lv.concurrency), str(lv.ok), str(lv.failed), f"{lv.completion_tokens}/{lv.length.asked}",
             f"{lv.output_tokens_per_s:.1f}", f"{lv.requests_per_s:.2f}", _pcts(lv.ttft_ms), _pcts(lv.tpot_ms),
             _pcts(lv.itl_ms)] for lv in report.levels]
    lines.append(table(rows, HEADER))
    notes = list(report.notes)
    for lv in report.levels:
        notes += [f"concurrency {lv.concurrency}: {note}" for note in lv.notes]
    if notes:
        lines += ["", *(f"note: {n}" for n in notes)]
    return "\n".join(lines)



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure throughput and latency of a server or of a local model")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--base-url", help="an OpenAI-compatible server (default: the local Fireside server)")
    where.add_argument("--local", metavar="MODEL", help="benchmark Fireside's engine on MODEL, with no server")
    p.add_argument("--model", help="the model to ask the server for (default: the first it lists)")
    p.add_argument("--endpoint", choices=["completions", "chat"], default="completions",
                   help="/v1/completions (raw prompts, the default) or /v1/chat/completions")
    p.add_argument("--api-key", help="bearer key for the server")
    p.add_argument("--concurrency", type=_levels, default=[1, 4, 8, 16], help="levels, e.g. 1,4,8,16")
    p.add_argument("--num-prompts", type=int, default=32, help="requests per level (default 32)")
    p.add_argument("--input-len", type=int, default=128, help="prompt length in words/tokens (default 128)")
    p.add_argument("--output-len", type=int, default=64, help="tokens to generate per request (default 64)")
    p.add_argument("--prompt-file", type=Path, help="take prompts from this file, one per line")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=1, help="unmeasured requests before the sweep (default 1)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds one request may take (default 300)")
    p.add_argument("--json", type=Path, metavar="PATH", help="write every figure as JSON")
    p.add_argument("--plot", type=Path, metavar="PATH.png", help="plot throughput and p99 latency")
    add_load_options(p)
    p.set_defaults(handler=cmd_bench)


def _levels(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None


def _config(args: argparse.Namespace) -> BenchConfig:
    return BenchConfig(concurrency=args.concurrency, num_prompts=args.num_prompts, input_len=args.input_len,
                       output_len=args.output_len, seed=args.seed, warmup=args.warmup, prompt_file=args.prompt_file)


def first_model(target: HttpTarget) -> str:
    """The first model the server lists at ``/v1/models``."""
    try:
        r = target.client.get(f"{target.base_url}/v1/models", timeout=10)
        r.raise_for_status()
        ids = [m["id"] for m in r.json().get("data", [])]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise BenchError(f"could not list the models of {target.base_url}: {exc}; name one with --model") from None
    if not ids:
        raise BenchError(f"{target.base_url} lists no models; name one with --model")
    return ids[0]


def http_target(args: argparse.Namespace) -> HttpTarget:
    key = args.api_key
    if args.base_url is None:
        settings = Settings.from_env()
        args.base_url = f"http://{settings.host}:{settings.port}"
        if key is None:
            key = _stored_key()
    target = HttpTarget(args.base_url, args.model or "", endpoint=args.endpoint, api_key=key,
                        timeout_s=args.timeout, max_connections=max(args.concurrency) + 2)
    target.model = args.model or first_model(target)
    return target


def _stored_key() -> str | None:
    """The local server's key from the OS keyring; None when there is none, or no keyring at all."""
    from ..apikey import load_api_key

    return load_api_key()


def _progress(level: LevelResult) -> None:
    print(f"concurrency {level.concurrency}: {level.ok} ok, {level.failed} failed, "
          f"{level.output_tokens_per_s:.1f} tokens/s", file=sys.stderr, flush=True)


def cmd_bench(args: argparse.Namespace) -> int:
    config = _config(args)
    config.check()
    engine = None
    if args.local:
        from ..facade import Engine

        engine = Engine(Settings.from_env(), idle_ttl_s=0, max_queue=max(config.concurrency) + 4)
        engine.load(args.local, load_options(args))
        target = LocalTarget(engine, args.local, endpoint=args.endpoint)
    else:
        target = http_target(args)
    try:
        report = run_sweep(target, config, model=args.local or target.model, endpoint=args.endpoint,
                           on_level=_progress)
    finally:
        target.close()
        if engine is not None:
            engine.close()
    print(format_table(report))
    if args.json:
        write_json(report, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    if args.plot:
        write_plot(report, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 1 if any(level.ok == 0 for level in report.levels) else 0

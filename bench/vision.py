"""Images against llama-server: Fireside's API server beside llama-server ``--mmproj`` on one vision pair.

Starts ``fireside serve`` and (given its path) llama-server built from the llama.cpp that
llama-cpp-python vendors, each a process of its own with the same threads and four slots, on the same
text model and projector: by default the tiny pair the tests build (``tests/helpers/vision_model.py``;
a 64-wide model, so the figures are the servers' own overheads more than any model's), or a real one
with ``--model`` and ``--mmproj`` (or ``FIRESIDE_TEST_VLM=model.gguf:mmproj.gguf``). Both get the same
OpenAI chat requests (an image as a data URL, greedy, a fixed number of tokens) from the same client,
alternating which goes first each round, and each round uses images neither has seen:

- first token: one request with one image, its time to first token;
- four clients: four requests at once, each with its own image, their aggregate output tokens/s;
- next turn: the same conversation's second turn (its image, the reply, a new question): how many
  times faster its first token comes than the first turn's (the image is not encoded again).

Prints medians over the rounds; the last line reads
``ratios: first-token A.AAx, four-clients B.BBx, next-turn C.Cx`` (speed ratios, higher is better:
llama-server's time over Fireside's, Fireside's tokens/s over llama-server's, Fireside's first turn
over its next turn). Without ``--llama-server`` only Fireside is measured.

    python bench/vision.py --llama-server /path/to/llama-server [--rounds 3] [--tokens 32]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.helpers: the tiny pair's builder

from fireside.engine.bench.targets import HttpTarget, RequestResult, free_port, started  # noqa: E402
from fireside.engine.library.starter import starter_path  # noqa: E402
from fireside.engine.settings import Settings  # noqa: E402
from tests.helpers.vision_model import build_vision_pair, data_url, image_bytes, write_projector  # noqa: E402

QUESTION = "Describe this picture."
SLOTS = 4


class ImageTarget(HttpTarget):
    """OpenAI chat with one image; ``history`` (the turns before) comes first when given."""

    def __init__(self, *args, repeat: bool = False, **kw):
        super().__init__(*args, endpoint="chat", **kw)
        self.repeat = repeat  # llama-server: Fireside's default repeat penalty, asked for

    def ask(self, image: bytes, max_tokens: int, history: list[dict] | None = None) -> RequestResult:
        self._messages = [{"role": "user", "content": [{"type": "text", "text": QUESTION},
                                                       {"type": "image_url", "image_url": {"url": data_url(image)}}]},
                          *(history or [])]
        return self.send("", max_tokens)

    def body(self, prompt: str, max_tokens: int, seed: int | None = None) -> dict:
        body = {**super().body(prompt, max_tokens, seed), "messages": self._messages}
        if self.repeat:
            body.update(repeat_penalty=1.1, repeat_last_n=64)
        return body


def pair(args: argparse.Namespace, folder: Path) -> tuple[Path, Path]:
    if args.model and args.mmproj:
        return Path(args.model), Path(args.mmproj)
    if os.environ.get("FIRESIDE_TEST_VLM"):
        model, mmproj = os.environ["FIRESIDE_TEST_VLM"].split(":", 1)
        return Path(model), Path(mmproj)
    if args.pair == "tower":
        return starter_path(), tower_projector(folder / "pair")
    return build_vision_pair(folder / "pair", starter_path())


def tower_projector(folder: Path) -> Path:
    """A projector the size of LLaVA-1.5's tower cut to 12 layers (CLIP ViT-B/14: 768 wide, 12 heads,
    224-pixel images in 256 patches), random weights, into the starter's 576-wide embeddings: the pair
    then costs what a small real one does (an image is 256 tokens, encoded in about as long as the
    starter takes to read them), where the tiny pair measures only the servers' overheads."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_projector(folder / "mmproj-starter-vit-b14-f32.gguf", n_layers=11, n_embd_text=576,
                           image_size=224, patch=14, width=768, n_head=12)


def start_fireside(home: Path, model: Path, mmproj: Path, threads: int, ctx: int) -> tuple[subprocess.Popen, str, str]:
    folder = Settings.from_env({"FIRESIDE_HOME": str(home)}).models_dir / "local" / "Bench-Vision-GGUF"
    folder.mkdir(parents=True, exist_ok=True)
    for src in (model, mmproj):
        if not (folder / src.name).exists():  # a link the library lists (it ignores symlinks out of its folders)
            try:
                os.link(src, folder / src.name)
            except OSError:
                shutil.copyfile(src, folder / src.name)
    model_id = f"local/Bench-Vision-GGUF/{model.stem}"
    port = free_port()
    cmd = [sys.executable, "-m", "fireside.engine", "serve", "--port", str(port), "--load", model_id,
           "--keep-alive", "-1", "--ctx", str(ctx), "--parallel", str(SLOTS), "--threads", str(threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "FIRESIDE_HOME": str(home)})
    return (*started(proc, port, "/v1/models"), model_id)


def start_llama_server(binary: str, model: Path, mmproj: Path, threads: int, ctx: int) -> tuple[subprocess.Popen, str, str]:
    port = free_port()
    cmd = [binary, "-m", str(model), "--mmproj", str(mmproj), "-t", str(threads), "-c", str(ctx * SLOTS),
           "-np", str(SLOTS), "--host", "127.0.0.1", "--port", str(port), "--no-webui"]
    return (*started(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port, "/health"),
            model.stem)



def _ok(r: RequestResult) -> RequestResult:
    if not r.ok:
        raise SystemExit(f"a request failed: {r.error}")
    return r


def measure(target: ImageTarget, tokens: int, seed: int) -> dict[str, float]:
    """One round on ``target`` with images of seeds ``seed``.. (unseen by either server)."""
    first = _ok(target.ask(image_bytes(seed, (320, 240)), tokens))
    images = [image_bytes(seed + 1 + i, (320, 240)) for i in range(SLOTS)]
    started = time.perf_counter()
    with ThreadPoolExecutor(SLOTS) as pool:
        results = [_ok(r) for r in pool.map(lambda im: target.ask(im, tokens), images)]
    wall = time.perf_counter() - started
    image = image_bytes(seed + 100, (320, 240))
    turn1 = _ok(target.ask(image, tokens))
    turn2 = _ok(target.ask(image, tokens, [{"role": "assistant", "content": "It is a picture of coloured blocks."},
                                           {"role": "user", "content": "And what colours are they?"}]))
    return {"first_token_s": first.ttft_s, "four_tok_s": sum(r.completion_tokens for r in results) / wall,
            "turn1_ttft_s": turn1.ttft_s, "turn2_ttft_s": turn2.ttft_s}


def report(results: dict[str, list[dict[str, float]]]) -> None:
    med = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in results.items()}
    for name, m in med.items():
        print(f"{name:>13}: first token {m['first_token_s'] * 1000:7.1f} ms | four clients {m['four_tok_s']:7.1f} tok/s"
              f" | turn 1 first token {m['turn1_ttft_s'] * 1000:7.1f} ms, next turn {m['turn2_ttft_s'] * 1000:7.1f} ms")
    f = med["fireside"]
    next_turn = f["turn1_ttft_s"] / f["turn2_ttft_s"]
    if "llama-server" not in med:
        print(f"ratios: first-token n/a, four-clients n/a, next-turn {next_turn:.1f}x")
        return
    ls = med["llama-server"]
    print(f"ratios: first-token {ls['first_token_s'] / f['first_token_s']:.2f}x, "
          f"four-clients {f['four_tok_s'] / ls['four_tok_s']:.2f}x, next-turn {next_turn:.1f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llama-server", help="llama-server binary (same vendored llama.cpp); without it, Fireside only")
    p.add_argument("--model", help="the text model GGUF (default: the tests' tiny pair)")
    p.add_argument("--mmproj", help="its projector GGUF")
    p.add_argument("--pair", choices=["tiny", "tower"], default="tiny",
                   help="without --model: the tests' tiny pair, or the starter with a ViT-B-sized projector")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    p.add_argument("--ctx", type=int, default=2048, help="tokens per slot")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="fireside-bench-vision-") as tmp:
        model, mmproj = pair(args, Path(tmp))
        procs = {"fireside": start_fireside(Path(tmp) / "home", model, mmproj, args.threads, args.ctx)}
        if args.llama_server:
            procs["llama-server"] = start_llama_server(args.llama_server, model, mmproj, args.threads, args.ctx)
        targets = {name: ImageTarget(url, mid, repeat=name == "llama-server") for name, (_, url, mid) in procs.items()}
        results: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
        try:
            for rnd in range(args.rounds):
                order = list(targets) if rnd % 2 == 0 else list(reversed(targets))
                for name in order:
                    results[name].append(measure(targets[name], args.tokens, 1000 * (rnd + 1)))  # the same images for both
        finally:
            for proc, _, _ in procs.values():
                proc.terminate()
                proc.wait(timeout=30)
        print(f"pair: {model.name} + {mmproj.name}; {args.rounds} rounds, {args.tokens} tokens, {args.threads} threads")
        report(results)


if __name__ == "__main__":
    main()

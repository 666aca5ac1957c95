#!/usr/bin/env python3
"""Side-by-side speed of streamlint and ruff, and the language server's latency.

Times `streamlint check` and `ruff check --isolated --no-cache --select E9` (ruff's parse-only
run: every file is read and parsed, only syntax errors are reported) on the same files, one
after the other in each repetition so both see the same machine state, and prints the median of
each and the median ratio, of wall-clock time and of CPU time. Then measures how long the language server takes from a `didChange`
of a 5,000-line file, edited as a file of the corpus's Python project, to the
`publishDiagnostics` for that version.

    python3 bench/bench.py [--corpus DIR] [--reps N] [--streamlint PATH] [--json FILE]

The corpus defaults to the pinned packages of bench/fetch-corpus.sh (`$STREAMLINT_CORPUS` or
~/.cache/streamlint-corpus). ruff is installed, pinned, into target/bench-venv on first use.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUFF_VERSION = "0.17.5"
REPO = Path(__file__).resolve().parent.parent


def ruff_binary() -> Path:
    venv = REPO / "target" / "bench-venv"
    ruff = venv / "bin" / "ruff"
    stamp = venv / f"ruff-{RUFF_VERSION}"
    if not stamp.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", f"ruff=={RUFF_VERSION}"], check=True)
        stamp.touch()
    return ruff


def timed(cmd: list) -> tuple:
    """Wall-clock and CPU (user + system) seconds of one run of `cmd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        sys.exit(f"{cmd[0]} failed with exit code {done.returncode}: {' '.join(cmd)}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def corpus_runs(streamlint: str, ruff: Path, paths: list, reps: int) -> dict:
    sl_cmd = [streamlint, "check", "--isolated", "--output-format", "concise", *paths]
    ruff_cmd = [str(ruff), "check", "--isolated", "--no-cache", "--select", "E9", "--quiet", *paths]
    timed(sl_cmd), timed(ruff_cmd)  # warm the file cache for both
    sl, rf, ratios, cpu_ratios = [], [], [], []
    for i in range(reps):
        # Alternate the order so neither tool always runs on a cache the other just warmed.
        if i % 2:
            r, s = timed(ruff_cmd), timed(sl_cmd)
        else:
            s, r = timed(sl_cmd), timed(ruff_cmd)
        sl.append(s[0])
        rf.append(r[0])
        ratios.append(s[0] / r[0])
        cpu_ratios.append(s[1] / r[1])
    return {
        "streamlint_s": statistics.median(sl),
        "ruff_s": statistics.median(rf),
        "ratio": statistics.median(ratios),
        # CPU time drifts less than wall time on a shared machine, but does not show how well a
        # tool keeps every core busy: the wall-clock ratio is the one that counts.
        "cpu_ratio": statistics.median(cpu_ratios),
        "runs": {"streamlint": sl, "ruff": rf},
    }


def lsp_send(proc, message: dict) -> None:
    body = json.dumps(message).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()


def lsp_read(proc) -> dict:
    length = None
    while True:
        line = proc.stdout.readline()
        if not line:
            sys.exit("the language server closed its output")
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(proc.stdout.read(length))


def five_thousand_lines() -> str:
    """A realistic module: many small stream-using functions, some of them buggy."""
    parts = ["import torch\n\n"]
    i = 0
    while sum(p.count("\n") for p in parts) < 5000:
        parts.append(
            f"def step_{i}(x, side):\n"
            f"    side.wait_stream(torch.cuda.current_stream())\n"
            f"    with torch.cuda.stream(side):\n"
            f"        y = torch.relu(x)\n"
            f"        z = y * 2\n"
            f"    torch.cuda.current_stream().wait_stream(side)\n"
            f"    y.record_stream(torch.cuda.current_stream())\n"
            f"    z.record_stream(torch.cuda.current_stream())\n"
            f"    return z + {i}\n\n\n"
        )
        i += 1
    return "".join(parts)


def lsp_latency(streamlint: str, edits: int, workspace: Path) -> dict:
    """The module is edited as a file of `workspace` (the corpus's Python folder): the server
    indexes that project once, and lints each edit against the other files' kept summaries."""
    proc = subprocess.Popen([streamlint, "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    root = workspace.resolve()
    uri = (root / "streamlint_bench_big_module.py").as_uri()
    text = five_thousand_lines()
    lsp_send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": None, "rootUri": root.as_uri()}})
    while lsp_read(proc).get("id") != 1:
        pass
    lsp_send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
    lsp_send(proc, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})

    def diagnostics_for(version: int) -> list:
        while True:
            msg = lsp_read(proc)
            if msg.get("method") == "textDocument/publishDiagnostics" and msg["params"].get("version") in (version, None):
                return msg["params"]["diagnostics"]

    diagnostics_for(1)
    latencies = []
    for v in range(2, edits + 2):
        # Remove or restore one wait: the diagnostics change with every edit.
        edited = text.replace("    torch.cuda.current_stream().wait_stream(side)\n", "", 1) if v % 2 else text
        start = time.perf_counter()
        lsp_send(proc, {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {"uri": uri, "version": v}, "contentChanges": [{"text": edited}]}})
        diagnostics_for(v)
        latencies.append((time.perf_counter() - start) * 1000)
    lsp_send(proc, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    lsp_send(proc, {"jsonrpc": "2.0", "method": "exit"})
    proc.wait(timeout=10)
    return {"lines": text.count("\n"), "edits": edits, "median_ms": statistics.median(latencies), "max_ms": max(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_corpus = os.environ.get("STREAMLINT_CORPUS", str(Path.home() / ".cache" / "streamlint-corpus"))
    parser.add_argument("--corpus", default=default_corpus)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--streamlint", default=str(REPO / "target" / "release" / "streamlint"))
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    paths = [str(p) for p in (Path(args.corpus) / "python", Path(args.corpus) / "rust") if p.is_dir()]
    if not paths:
        sys.exit(f"no corpus under {args.corpus}: run corpus/fetch-corpus.sh first")
    files = sum(1 for p in paths for f in Path(p).rglob("*") if f.suffix in (".py", ".rs"))
    corpus = corpus_runs(args.streamlint, ruff_binary(), paths, args.reps)
    print(f"corpus: {files} files under {args.corpus}, {args.reps} side-by-side runs, {os.cpu_count()} cores")
    print(f"  streamlint check        median {corpus['streamlint_s']:.2f} s")
    print(f"  ruff {RUFF_VERSION} --select E9  median {corpus['ruff_s']:.2f} s")
    print(f"  ratio streamlint/ruff   median {corpus['ratio']:.2f}")
    print(f"  CPU time ratio          median {corpus['cpu_ratio']:.2f} (user + system)")
    lsp = lsp_latency(args.streamlint, args.edits, Path(paths[0]))
    print(f"language server: didChange -> publishDiagnostics on a {lsp['lines']}-line file "
          f"in the project {paths[0]}, {lsp['edits']} edits: median {lsp['median_ms']:.1f} ms, "
          f"max {lsp['max_ms']:.1f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps({"corpus": corpus, "files": files, "lsp": lsp}, indent=2))


if __name__ == "__main__":
    main()

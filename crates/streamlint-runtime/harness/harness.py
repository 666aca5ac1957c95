"""streamlint's runtime harness for the Python cases.

`streamlint validate` writes this file to a temporary folder and runs it with the interpreter the
user chose. A case is a file under `fixtures/python/SLxxx/` named `bad_runtime_*.py` or
`good_runtime_*.py` that defines `case(harness)` and returns how many elements came out wrong.
The case gets a `Harness`: `n` (elements per tensor), `value` (this trial's value, new in every
trial so memory left over from an earlier trial never looks right), `delay()` (keep the current
stream busy, so that an unordered consumer on another stream runs before the producer),
`reuse()` (allocate and fill `n` elements on the current stream: the allocation that takes a
freed block) and `wrong(tensor, expected)` (synchronize the device, then count the elements that
differ).

Commands, each printing one JSON object per line on stdout:
  env                     the PyTorch build, and whether it sees a GPU
  trials FILE...          for each case: warm-up trials, then the counted trials
  sanitize FILE           one trial; run with TORCH_CUDA_SANITIZER set, so that PyTorch's CUDA
                          sanitizer watches it from `import torch` on
  check FILE...           trials of every case without, then with streamlint's lifetime checker
                          (`checker.py`): what it reports, and how much slower a trial ran
  cost                    a training step (correct stream code: a side-stream prefetch that records
                          the consumer), timed without, then with the lifetime checker
"""

import argparse
import importlib.util
import itertools
import json
import sys
import time
import traceback

import torch

# Trial values for the whole process: no two trials, of any case, write the same value.
_VALUES = itertools.count(1)


class Harness:
    """Delay, memory pressure and checks for one trial of one case."""

    def __init__(self, n, cycles):
        self.n = n
        self.value = float(next(_VALUES))
        self._cycles = cycles
        self._held = []

    def delay(self):
        """Keep the current stream busy for a while (one thread spinning on the clock)."""
        torch.cuda._sleep(self._cycles)

    def reuse(self):
        """Allocate `n` elements on the current stream and fill them with `-value`.

        The tensor is kept until the trial ends, like the next user of freed memory would."""
        self._held.append(torch.full((self.n,), -self.value, device="cuda"))

    def wrong(self, tensor, expected):
        """Wait for all work on the device, then count the elements that are not `expected`."""
        torch.cuda.synchronize()
        return int((tensor != expected).sum().item())

    def finish(self):
        torch.cuda.synchronize()
        self._held.clear()


def emit(record):
    print(json.dumps(record), flush=True)


def load_case(path):
    spec = importlib.util.spec_from_file_location("streamlint_runtime_case", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    case = getattr(module, "case", None)
    if not callable(case):
        raise AttributeError(f"{path} defines no `case(harness)` function")
    return case


def describe(error):
    last = traceback.extract_tb(error.__traceback__)[-1:]
    where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(error).__name__}: {error}{where}"


def run_trials(args):
    for path in args.cases:
        try:
            case = load_case(path)
            counts = []
            for trial in range(args.warmup + args.trials):
                harness = Harness(args.elements, args.cycles)
                wrong = int(case(harness))
                harness.finish()
                if trial >= args.warmup:
                    counts.append(wrong)
            emit({"case": path, "corrupted": counts})
        except Exception as error:  # report the case and go on with the next one
            torch.cuda.synchronize()
            emit({"case": path, "error": describe(error)})


def run_sanitized(args):
    case = load_case(args.case)
    harness = Harness(args.elements, args.cycles)
    raised = False
    try:
        case(harness)
    except Exception as error:
        # The sanitizer prints each race to stderr, then raises CUDASanitizerErrors at the op.
        if type(error).__name__ != "CUDASanitizerErrors":
            torch.cuda.synchronize()
            emit({"case": args.case, "error": describe(error)})
            return
        raised = True
    harness.finish()
    emit({"case": args.case, "raised": raised})


def timed_trial(case, args):
    """One trial, from the case's start to the end of its work on the device: seconds."""
    harness = Harness(args.elements, args.cycles)
    start = time.perf_counter()
    case(harness)
    harness.finish()
    return time.perf_counter() - start


def run_checked(args):
    """Every case's trials without the checker first (it cannot be switched off once on), then
    with it; one line per case."""
    cases, plain = {}, {}
    for path in args.cases:
        try:
            cases[path] = load_case(path)
            timed_trial(cases[path], args)  # warm-up: the first trial pays for loading kernels
            plain[path] = min(timed_trial(cases[path], args) for _ in range(2))
        except Exception as error:
            torch.cuda.synchronize()
            emit({"case": path, "error": describe(error)})
    try:
        import checker

        watching = checker.install()
    except Exception as error:  # a PyTorch without the hooks the checker is built on
        for path in plain:
            emit({"case": path, "error": f"the lifetime checker cannot start: {describe(error)}"})
        return
    for path in plain:
        before = len(watching.lifetimes.reports)
        try:
            checked = min(timed_trial(cases[path], args) for _ in range(2))
        except Exception as error:
            torch.cuda.synchronize()
            emit({"case": path, "error": describe(error)})
            continue
        reports = [r.to_json() for r in watching.lifetimes.reports[before:]]
        emit({"case": path, "reports": reports, "slowdown": checked / plain[path]})


def training_step(width=1024, batch=512, depth=6):
    """A training step with correct stream code: an MLP with AdamW whose next batch is
    prefetched on a side stream (waited for, and recorded for the current stream). Returns
    `run(steps)`, which times that many steps."""
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    copy = torch.cuda.Stream()
    hosts = [torch.randn(batch, width).pin_memory() for _ in range(2)]

    def prefetch(step):
        with torch.cuda.stream(copy):
            return hosts[step % 2].cuda(non_blocking=True)

    def run(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        batch_now = prefetch(0)
        for step in range(steps):
            torch.cuda.current_stream().wait_stream(copy)
            batch_now.record_stream(torch.cuda.current_stream())
            x, batch_now = batch_now, prefetch(step + 1)
            loss = model(x).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        return time.perf_counter() - start

    return run


def training_step_cost(args):
    """The checker's cost on `training_step`: its time without, then with the checker."""
    try:
        run = training_step()
        run(3)  # warm-up
        plain = run(args.steps)
        import checker

        watching = checker.install()
        run(3)
        checked = run(args.steps)
    except Exception as error:
        emit({"error": describe(error)})
        return
    reports = [r.to_json() for r in watching.lifetimes.reports]
    emit({"steps": args.steps, "plain": plain, "checked": checked, "reports": reports})


def environment(_args):
    emit(
        {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "available": torch.cuda.is_available(),
        }
    )


def main():
    parser = argparse.ArgumentParser(description="streamlint runtime harness")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("env").set_defaults(run=environment)
    cost = commands.add_parser("cost")
    cost.add_argument("--steps", type=int, default=50)
    cost.set_defaults(run=training_step_cost)
    for name, run in (("trials", run_trials), ("sanitize", run_sanitized), ("check", run_checked)):
        command = commands.add_parser(name)
        command.add_argument("--elements", type=int, required=True)
        command.add_argument("--cycles", type=int, required=True)
        command.set_defaults(run=run)
        if name == "trials":
            command.add_argument("--trials", type=int, required=True)
            command.add_argument("--warmup", type=int, required=True)
        if name == "sanitize":
            command.add_argument("case")
        else:
            command.add_argument("cases", nargs="+")
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    sys.exit(main())

"""Written by `streamlint validate --run` to a folder put first on the program's PYTHONPATH:
starts streamlint's lifetime checker (`checker.py`) as soon as the program has imported torch,
with its reports appended to the file named by STREAMLINT_CHECKER_REPORT. The program's own
`sitecustomize`, if it has one further down the path, runs after this one.
"""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPORT = os.environ.get("STREAMLINT_CHECKER_REPORT")


class _AfterTorch:
    """A finder that lets `import torch` proceed as usual, then starts the checker."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_check(module):
            exec_module(module)
            try:
                import checker

                checker.install(_REPORT)
            except Exception as error:  # the program runs on, unchecked
                sys.stderr.write(f"streamlint: the lifetime checker did not start: {error}\n")

        spec.loader.exec_module = exec_then_check
        return spec


def _run_the_programs_own():
    for entry in sys.path:
        folder = os.path.abspath(entry or os.curdir)
        candidate = os.path.join(folder, "sitecustomize.py")
        if folder != _HERE and os.path.isfile(candidate):
            with open(candidate) as f:
                code = compile(f.read(), candidate, "exec")
            exec(code, {"__name__": "sitecustomize", "__file__": candidate})
            return


if _REPORT:
    sys.meta_path.insert(0, _AfterTorch())
_run_the_programs_own()

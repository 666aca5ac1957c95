"""streamlint's run-time lifetime checker: `lifetime.Lifetimes` fed from a running PyTorch program.

Built on PyTorch's public hooks: the GPU trace callbacks of `torch.cuda._gpu_trace` (allocations
and frees of the caching allocator, event records and waits, stream, event and device
synchronizations; they report only once `torch._C._activate_gpu_trace()` was called) and a
`TorchDispatchMode` that sees every operator with its tensors and the current stream. `numpy()`,
`tolist()` and `__array__` read host memory without passing the dispatcher; they are wrapped so
that those reads are seen too. Not seen: host reads through other paths (a `data_ptr()` handed to
C code, the buffer protocol on a NumPy array made earlier), and operators run on threads the
dispatch mode is not active on (autograd's backward threads among them).

`install(report_path)` starts it for the rest of the process; each report is appended to
`report_path` as one JSON object per line as soon as it is found.
"""

import json
import os
import sys
import threading

import torch
import torch.cuda._gpu_trace as gpu_trace
from torch.utils._python_dispatch import TorchDispatchMode

from lifetime import Lifetimes

_TORCH_DIR = os.path.dirname(torch.__file__)
_HERE = os.path.dirname(os.path.abspath(__file__))
_DEPTH = 12

aten = torch.ops.aten
_TRANSFERS = {aten._to_copy.default, aten.copy_.default}
_SCALAR_READS = {aten._local_scalar_dense.default}


# Per file name: is it the program's (not PyTorch's, not this checker's, not generated)?
_PROGRAM_FILES = {}


def _of_the_program(path):
    mine = _PROGRAM_FILES.get(path)
    if mine is None:
        # `a/../b` is `b`: a case under `harness/../fixtures` is the program's, not ours.
        where = os.path.normpath(path)
        mine = not (
            where.startswith(_TORCH_DIR) or where.startswith(_HERE) or path.startswith("<")
        )
        _PROGRAM_FILES[path] = mine
    return mine


def _stack(skip=2):
    """Where the program is: its innermost frames outside PyTorch and this checker, outermost
    first, as (file, line, function)."""
    frames = []
    frame = sys._getframe(skip)
    while frame is not None and len(frames) < _DEPTH:
        code = frame.f_code
        if _of_the_program(code.co_filename):
            frames.append((code.co_filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    frames.reverse()
    return frames


def _storage_ptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # tensors without storage (meta, sparse, subclasses)
        return None


def _tensors(values):
    for v in values:
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from _tensors(v)


def _writes(func):
    """Does the operator write one of its arguments (in place, or `out=`)? Host buffers a copy
    is pending on are taken to be that argument."""
    try:
        written = [a for a in func._schema.arguments if a.alias_info and a.alias_info.is_write]
    except Exception:
        return False
    return bool(written)


def _stream_handle(s):
    handle = getattr(s, "cuda_stream", None)
    if handle is not None:
        return handle
    try:  # a generic `torch.Stream`, as operators receive it
        return torch.cuda.Stream(
            stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type
        ).cuda_stream
    except Exception:
        return None


class Checker:
    def __init__(self, report_path=None):
        def describe(stream):
            # Asked only once the program has used the device: installing initializes nothing.
            default = torch.cuda.default_stream().cuda_stream
            return "the default stream" if stream == default else f"stream {stream:#x}"

        self.lifetimes = Lifetimes(describe)
        self._report_path = report_path
        self._written = 0
        self._lock = threading.RLock()

    def flush(self):
        """Append the reports found since the last flush to the report file."""
        if self._report_path is None:
            return
        new = self.lifetimes.reports[self._written :]
        if not new:
            return
        with open(self._report_path, "a") as out:
            for report in new:
                out.write(json.dumps(report.to_json()) + "\n")
        self._written += len(new)

    # ----- trace callbacks ----------------------------------------------------------------

    def allocated(self, ptr):
        with self._lock:
            self.lifetimes.allocate(ptr, torch.cuda.current_stream().cuda_stream, _stack())

    def freed(self, ptr):
        with self._lock:
            self.lifetimes.free(ptr, _stack())
            self.flush()

    def event_recorded(self, event, stream):
        with self._lock:
            self.lifetimes.record_event(event, stream)

    def event_waited(self, event, stream):
        with self._lock:
            self.lifetimes.wait_event(event, stream)

    def stream_synchronized(self, stream):
        with self._lock:
            self.lifetimes.sync_stream(stream)

    def event_synchronized(self, event):
        with self._lock:
            self.lifetimes.sync_event(event)

    def device_synchronized(self):
        with self._lock:
            self.lifetimes.sync_device()

    # ----- operators ----------------------------------------------------------------------

    def host_read(self, tensor, write=False):
        if tensor.device.type != "cpu":
            return
        ptr = _storage_ptr(tensor)
        if ptr is not None:
            with self._lock:
                self.lifetimes.host_access(ptr, write, _stack(3))
                self.flush()

    def operator(self, func, args, kwargs, out):
        inputs = list(_tensors(args)) + list(_tensors(kwargs.values()))
        outputs = list(_tensors([out]))
        on_device = [t for t in inputs + outputs if t.is_cuda]
        with self._lock:
            lifetimes = self.lifetimes
            if not on_device:
                # A host operator: it reads its inputs and writes its outputs and in-place arguments.
                stack = None
                for t in inputs:
                    ptr = _storage_ptr(t)
                    if ptr in lifetimes.pending:
                        stack = stack or _stack(3)
                        lifetimes.host_access(ptr, _writes(func), stack)
                self.flush()
                return
            stream = torch.cuda.current_stream().cuda_stream
            stack = _stack(3)
            if func is aten.record_stream.default:
                # It enqueues nothing: the allocator waits for the stream at the free.
                target = _stream_handle(args[1])
                if target is not None:
                    lifetimes.record_stream(_storage_ptr(args[0]), target, stack)
                return
            tick = lifetimes.tick(stream)
            lifetimes.use({_storage_ptr(t) for t in on_device}, stream, tick, stack)
            if func in _SCALAR_READS:
                # `.item()` on a device tensor copies it to the host and waits for the stream.
                lifetimes.sync_stream(stream)
            elif func in _TRANSFERS:
                self._transfer(func, args, kwargs, out, stream, tick, stack)
            self.flush()

    def _transfer(self, func, args, kwargs, out, stream, tick, stack):
        if func is aten.copy_.default:
            dst, src = args[0], args[1]
            non_blocking = kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
        else:
            src, dst = args[0], out
            non_blocking = kwargs.get("non_blocking", False)
        if not (isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor)):
            return
        lifetimes = self.lifetimes
        if src.is_cuda and not dst.is_cuda:
            if non_blocking:
                lifetimes.copy_to_host(_storage_ptr(dst), stream, tick, stack)
            else:
                # A blocking copy to the host returns when the stream has run it.
                lifetimes.sync_stream(stream)
        elif dst.is_cuda and not src.is_cuda:
            lifetimes.made_by_upload(_storage_ptr(dst))
            if non_blocking and src.is_pinned():
                lifetimes.copy_from_host(_storage_ptr(src), stream, tick, stack)


class _Watch(TorchDispatchMode):
    def __init__(self, checker):
        super().__init__()
        self.checker = checker

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self.checker.operator(func, args, kwargs, out)
        except Exception:  # never break the program being checked
            pass
        return out


_installed = None


def install(report_path=None):
    """Start checking the rest of this process (once); returns the checker."""
    global _installed
    if _installed is not None:
        return _installed
    checker = Checker(report_path)
    torch._C._activate_gpu_trace()
    gpu_trace.register_callback_for_memory_allocation(checker.allocated)
    gpu_trace.register_callback_for_memory_deallocation(checker.freed)
    gpu_trace.register_callback_for_event_record(checker.event_recorded)
    gpu_trace.register_callback_for_event_wait(checker.event_waited)
    gpu_trace.register_callback_for_stream_synchronization(checker.stream_synchronized)
    gpu_trace.register_callback_for_event_synchronization(checker.event_synchronized)
    gpu_trace.register_callback_for_device_synchronization(checker.device_synchronized)
    for name, write in (("numpy", False), ("tolist", False), ("__array__", False)):
        original = getattr(torch.Tensor, name)

        def wrapped(self, *a, _original=original, _write=write, **k):
            try:
                checker.host_read(self, _write)
            except Exception:
                pass
            return _original(self, *a, **k)

        setattr(torch.Tensor, name, wrapped)
    watch = _Watch(checker)
    watch.__enter__()
    checker._watch = watch
    _installed = checker
    return checker

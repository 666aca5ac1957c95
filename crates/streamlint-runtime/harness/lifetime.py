"""The bookkeeping of streamlint's run-time lifetime checker, without PyTorch.

PyTorch's CUDA sanitizer forgets a block when it is freed; the hazards streamlint exists for
happen exactly there: the caching allocator hands a freed block to the next allocation on the
block's allocation stream, in that stream's order, whatever other streams still do with it. This
module keeps, per block, what the sanitizer drops, and judges each free and each host access:

- streams have vector clocks: an operation on a stream ticks its own entry; an event recorded on
  a stream keeps a copy of its clock; a stream that waits on an event takes the maximum; the host
  learns a stream's clock when it synchronizes with the stream, an event or the device;
- a block has its allocation stream, the last use of it on every stream (the tick, and where in
  the program it happened) and the streams `record_stream` named;
- at a free, every stream other than the allocation stream that used the block must be ordered
  before the allocation stream's current point, or known finished by the host, or recorded on the
  block; otherwise the block can be reused under that stream (SL001; SL004 when the block was made
  by a host-to-device transfer). A `record_stream` of the allocation stream itself, or of a stream
  that never used the block, does nothing (SL002);
- a host buffer that a `non_blocking` device-to-host copy writes must not be touched by the host
  before the host knows the copy's stream finished it; one that a `non_blocking` host-to-device
  copy reads must not be written before then (SL007).

`checker.py` feeds it from PyTorch's GPU trace callbacks and a dispatch mode. Every method takes
plain values (stream and event handles as integers, pointers as integers, stacks as lists of
(file, line, function)), so the logic is tested on recorded sequences without a GPU.
"""


def _merge(into, other):
    """`into` becomes the entry-wise maximum of the two clocks."""
    for stream, tick in other.items():
        if into.get(stream, 0) < tick:
            into[stream] = tick


class Report:
    """One hazard seen at run time."""

    def __init__(self, code, message, stacks):
        self.code = code
        self.message = message
        # [(label, [(file, line, function), ...]), ...], innermost frame last.
        self.stacks = stacks

    def to_json(self):
        return {
            "code": self.code,
            "message": self.message,
            "stacks": [
                {
                    "label": label,
                    "frames": [{"file": f, "line": n, "function": fn} for f, n, fn in frames],
                }
                for label, frames in self.stacks
            ],
        }


class _Block:
    __slots__ = ("stream", "upload", "uses", "recorded", "allocated_at")

    def __init__(self, stream, allocated_at):
        self.stream = stream
        self.upload = False
        # stream -> (tick, stack) of its last use
        self.uses = {}
        # stream -> stack of the `record_stream` call
        self.recorded = {}
        self.allocated_at = allocated_at


class Lifetimes:
    """Clocks, blocks and pending host copies of one process."""

    def __init__(self, describe_stream=None):
        self.clocks = {}
        self.events = {}
        self.host = {}
        self.blocks = {}
        # host pointer -> (stream, tick, stack, direction): "to host" or "from host"
        self.pending = {}
        self.reports = []
        self._seen = set()
        self._describe = describe_stream or (lambda s: f"stream {s:#x}")

    # ----- time ---------------------------------------------------------------------------

    def _clock(self, stream):
        clock = self.clocks.get(stream)
        if clock is None:
            clock = self.clocks[stream] = {stream: 0}
        return clock

    def tick(self, stream):
        """An operation enqueued on `stream`; returns its tick."""
        clock = self._clock(stream)
        clock[stream] += 1
        return clock[stream]

    def record_event(self, event, stream):
        self.events[event] = dict(self._clock(stream))

    def wait_event(self, event, stream):
        _merge(self._clock(stream), self.events.get(event, {}))

    def sync_stream(self, stream):
        _merge(self.host, self._clock(stream))

    def sync_event(self, event):
        _merge(self.host, self.events.get(event, {}))

    def sync_device(self):
        for clock in self.clocks.values():
            _merge(self.host, clock)

    def _done(self, stream, tick, after):
        """Is `stream`'s work up to `tick` ordered before the point `after` (a clock), or known
        finished by the host?"""
        return after.get(stream, 0) >= tick or self.host.get(stream, 0) >= tick

    # ----- device memory ------------------------------------------------------------------

    def allocate(self, ptr, stream, stack=()):
        self.blocks[ptr] = _Block(stream, list(stack))

    def made_by_upload(self, ptr):
        """The block at `ptr` holds data a host-to-device transfer put there."""
        block = self.blocks.get(ptr)
        if block is not None:
            block.upload = True

    def use(self, ptrs, stream, tick, stack):
        """The operation at `tick` on `stream` reads or writes the blocks at `ptrs`. An operation
        with no place in the program (a backward kernel, run by autograd's own thread) keeps the
        place of the stream's last use that had one."""
        for ptr in ptrs:
            block = self.blocks.get(ptr)
            if block is not None:
                previous = block.uses.get(stream)
                if not stack and previous is not None:
                    stack = previous[1]
                block.uses[stream] = (tick, stack)

    def record_stream(self, ptr, stream, stack):
        block = self.blocks.get(ptr)
        if block is not None:
            block.recorded[stream] = stack

    def free(self, ptr, stack):
        """The program let go of the block at `ptr`: judge whether it can be reused safely."""
        block = self.blocks.pop(ptr, None)
        if block is None:
            return
        now = self._clock(block.stream)
        for stream, recorded_at in block.recorded.items():
            if stream == block.stream:
                why = "its own allocation stream, which the allocator already waits for"
            elif stream not in block.uses:
                why = f"{self._describe(stream)}, which never used the block"
            else:
                continue
            self._report(
                "SL002",
                f"`record_stream` names {why}: the call does nothing",
                [("record_stream", recorded_at), ("freed", stack)],
            )
        for stream, (tick, used_at) in block.uses.items():
            if stream == block.stream or stream in block.recorded:
                continue
            if self._done(stream, tick, now):
                continue
            code = "SL004" if block.upload else "SL001"
            made = "uploaded" if block.upload else "allocated"
            self._report(
                code,
                f"memory {made} on {self._describe(block.stream)} is freed while "
                f"{self._describe(stream)} may still use it: nothing recorded that stream on it, "
                f"made the allocation stream wait for it, or synchronized it",
                [("freed", stack), ("last used", used_at), (made, block.allocated_at)],
            )

    # ----- host memory --------------------------------------------------------------------

    def copy_to_host(self, host_ptr, stream, tick, stack):
        """A `non_blocking` copy on `stream` writes the host buffer at `host_ptr`."""
        self.pending[host_ptr] = (stream, tick, stack, "to host")

    def copy_from_host(self, host_ptr, stream, tick, stack):
        """A `non_blocking` copy on `stream` reads the pinned host buffer at `host_ptr`."""
        self.pending[host_ptr] = (stream, tick, stack, "from host")

    def host_access(self, host_ptr, write, stack):
        """The host reads (or writes) the buffer at `host_ptr`."""
        pending = self.pending.get(host_ptr)
        if pending is None:
            return
        stream, tick, copied_at, direction = pending
        if self.host.get(stream, 0) >= tick:
            del self.pending[host_ptr]
            return
        if direction == "from host" and not write:
            return
        what = "written" if write else "read"
        if direction == "to host":
            message = (
                f"host memory is {what} before the non-blocking copy into it on "
                f"{self._describe(stream)} is known to have finished"
            )
        else:
            message = (
                f"pinned host memory is written while the non-blocking copy from it on "
                f"{self._describe(stream)} may still be reading it"
            )
        self._report("SL007", message, [("host access", stack), ("copy", copied_at)])

    # ----- reports ------------------------------------------------------------------------

    def _report(self, code, message, stacks):
        # One report per hazard and place: a loop hitting it a thousand times says it once.
        key = (code,) + tuple(tuple(frames[-1:]) for _, frames in stacks)
        if key in self._seen:
            return
        self._seen.add(key)
        self.reports.append(Report(code, message, stacks))

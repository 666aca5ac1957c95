"""Tests of the lifetime checker's bookkeeping on recorded event sequences (no PyTorch, no GPU).

Run: python3 crates/streamlint-runtime/harness/test_lifetime.py
Each sequence is what the checker hears from PyTorch for a small program: allocations and frees
with the stream current at the time, operators with their stream, event records and waits (a
`wait_stream` is a record on one stream and a wait on the other), synchronizations.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lifetime import Lifetimes  # noqa: E402

MAIN, SIDE = 0, 0x5E1D
X, Y, HOST = 0x1000, 0x2000, 0x9000


def at(line):
    return [("train.py", line, "step")]


def codes(lifetimes):
    return [r.code for r in lifetimes.reports]


def wait_stream(lt, waiter, waitee, event):
    lt.record_event(event, waitee)
    lt.wait_event(event, waiter)


def side_tensor_read_on_main(lt):
    """`x` made on the side stream, waited for and read on main (lines 3 to 5)."""
    lt.allocate(X, SIDE)
    lt.use([X], SIDE, lt.tick(SIDE), at(3))
    wait_stream(lt, MAIN, SIDE, event=1)
    lt.use([X], MAIN, lt.tick(MAIN), at(5))


class Frees(unittest.TestCase):
    def test_a_free_while_another_stream_may_use_the_block_is_reported(self):
        lt = Lifetimes()
        side_tensor_read_on_main(lt)
        lt.free(X, at(6))
        self.assertEqual(codes(lt), ["SL001"])
        stacks = dict(lt.reports[0].stacks)
        self.assertEqual(stacks["freed"], at(6))
        self.assertEqual(stacks["last used"], at(5))

    def test_record_stream_of_the_user_makes_the_free_safe(self):
        lt = Lifetimes()
        side_tensor_read_on_main(lt)
        lt.record_stream(X, MAIN, at(5))
        lt.free(X, at(6))
        self.assertEqual(codes(lt), [])

    def test_a_wait_of_the_allocation_stream_after_the_use_makes_it_safe(self):
        lt = Lifetimes()
        side_tensor_read_on_main(lt)
        wait_stream(lt, SIDE, MAIN, event=2)
        lt.free(X, at(7))
        self.assertEqual(codes(lt), [])

    def test_a_wait_recorded_before_the_use_does_not(self):
        lt = Lifetimes()
        lt.allocate(X, SIDE)
        lt.record_event(2, MAIN)  # before main's read
        side_tensor_read_on_main(lt)
        lt.wait_event(2, SIDE)
        lt.free(X, at(7))
        self.assertEqual(codes(lt), ["SL001"])

    def test_a_host_synchronization_after_the_use_makes_it_safe(self):
        for sync in ("stream", "device", "event"):
            lt = Lifetimes()
            side_tensor_read_on_main(lt)
            if sync == "stream":
                lt.sync_stream(MAIN)
            elif sync == "device":
                lt.sync_device()
            else:
                lt.record_event(3, MAIN)
                lt.sync_event(3)
            lt.free(X, at(7))
            self.assertEqual(codes(lt), [], sync)

    def test_uses_on_the_allocation_stream_alone_are_safe(self):
        lt = Lifetimes()
        lt.allocate(X, MAIN)
        lt.use([X], MAIN, lt.tick(MAIN), at(2))
        lt.free(X, at(3))
        self.assertEqual(codes(lt), [])

    def test_an_upload_freed_under_its_consumer_is_sl004(self):
        lt = Lifetimes()
        lt.allocate(X, SIDE)
        lt.made_by_upload(X)
        lt.use([X], SIDE, lt.tick(SIDE), at(3))
        wait_stream(lt, MAIN, SIDE, event=1)
        lt.use([X], MAIN, lt.tick(MAIN), at(5))
        lt.free(X, at(6))
        self.assertEqual(codes(lt), ["SL004"])

    def test_a_free_on_autograds_thread_keeps_the_programs_places(self):
        # Backward kernels and the free of a saved input run on autograd's thread: no program
        # frames there. The report still names the forward use and the allocation.
        lt = Lifetimes()
        lt.allocate(X, SIDE, at(3))
        lt.use([X], SIDE, lt.tick(SIDE), at(3))
        wait_stream(lt, MAIN, SIDE, event=1)
        lt.use([X], MAIN, lt.tick(MAIN), at(5))
        lt.use([X], MAIN, lt.tick(MAIN), [])
        lt.free(X, [])
        self.assertEqual(codes(lt), ["SL001"])
        stacks = dict(lt.reports[0].stacks)
        self.assertEqual(stacks["freed"], [])
        self.assertEqual(stacks["last used"], at(5))
        self.assertEqual(stacks["allocated"], at(3))

    def test_blocks_allocated_before_the_checker_are_ignored(self):
        lt = Lifetimes()
        lt.use([Y], MAIN, lt.tick(MAIN), at(2))
        lt.free(Y, at(3))
        self.assertEqual(codes(lt), [])


class RecordStream(unittest.TestCase):
    def test_recording_the_allocation_stream_is_sl002_and_the_free_is_still_unsafe(self):
        lt = Lifetimes()
        side_tensor_read_on_main(lt)
        lt.record_stream(X, SIDE, at(4))
        lt.free(X, at(6))
        self.assertEqual(sorted(codes(lt)), ["SL001", "SL002"])
        sl002 = next(r for r in lt.reports if r.code == "SL002")
        self.assertIn("allocation stream", sl002.message)
        self.assertEqual(dict(sl002.stacks)["record_stream"], at(4))

    def test_recording_a_stream_that_never_used_the_block_is_sl002(self):
        lt = Lifetimes()
        lt.allocate(X, MAIN)
        lt.use([X], MAIN, lt.tick(MAIN), at(2))
        lt.record_stream(X, SIDE, at(3))
        lt.free(X, at(4))
        self.assertEqual(codes(lt), ["SL002"])
        self.assertIn("never used", lt.reports[0].message)


class HostCopies(unittest.TestCase):
    def copy_back(self, lt):
        lt.allocate(X, MAIN)
        lt.use([X], MAIN, lt.tick(MAIN), at(2))
        tick = lt.tick(MAIN)
        lt.use([X], MAIN, tick, at(3))
        lt.copy_to_host(HOST, MAIN, tick, at(3))

    def test_a_host_read_before_the_copy_is_known_done_is_sl007(self):
        lt = Lifetimes()
        self.copy_back(lt)
        lt.host_access(HOST, False, at(4))
        self.assertEqual(codes(lt), ["SL007"])
        self.assertEqual(dict(lt.reports[0].stacks)["host access"], at(4))

    def test_a_synchronization_first_makes_the_read_safe(self):
        lt = Lifetimes()
        self.copy_back(lt)
        lt.record_event(5, MAIN)
        lt.sync_event(5)
        lt.host_access(HOST, False, at(5))
        self.assertEqual(codes(lt), [])
        self.assertNotIn(HOST, lt.pending)

    def test_a_synchronization_of_another_stream_does_not(self):
        lt = Lifetimes()
        self.copy_back(lt)
        lt.sync_stream(SIDE)
        lt.host_access(HOST, False, at(5))
        self.assertEqual(codes(lt), ["SL007"])

    def test_reading_the_source_of_an_upload_is_safe_and_writing_it_is_not(self):
        lt = Lifetimes()
        lt.copy_from_host(HOST, SIDE, lt.tick(SIDE), at(2))
        lt.host_access(HOST, False, at(3))
        self.assertEqual(codes(lt), [])
        lt.host_access(HOST, True, at(4))
        self.assertEqual(codes(lt), ["SL007"])

    def test_a_hazard_hit_in_a_loop_is_reported_once(self):
        lt = Lifetimes()
        self.copy_back(lt)
        for _ in range(3):
            lt.host_access(HOST, False, at(4))
        self.assertEqual(codes(lt), ["SL007"])


class Reports(unittest.TestCase):
    def test_reports_serialize_with_their_stacks(self):
        lt = Lifetimes(lambda s: "the default stream" if s == MAIN else "the side stream")
        side_tensor_read_on_main(lt)
        lt.free(X, at(6))
        report = lt.reports[0].to_json()
        self.assertEqual(report["code"], "SL001")
        self.assertIn("the side stream", report["message"])
        self.assertIn("the default stream", report["message"])
        self.assertEqual(
            report["stacks"][0],
            {"label": "freed", "frames": [{"file": "train.py", "line": 6, "function": "step"}]},
        )


if __name__ == "__main__":
    unittest.main()

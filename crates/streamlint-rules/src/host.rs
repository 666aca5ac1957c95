//! SL007 unsynchronized-host-access: the host touches host memory that a stream is still
//! copying into (a `non_blocking` device-to-host copy) or out of (a pending `non_blocking`
//! host-to-device copy from pinned memory).

use streamlint_graph::{Body, EscapeKind, Memory, Op, OpId, OpKind, State};

use crate::{Context, Finding, Label, Rule, Severity};

pub struct UnsynchronizedHostAccess;

impl Rule for UnsynchronizedHostAccess {
    fn code(&self) -> &'static str {
        "SL007"
    }

    fn applies_to(&self, body: &Body) -> bool {
        // Host memory only.
        body.buffers.iter().any(|b| b.memory != Memory::Device)
    }

    fn visit(&self, cx: &mut Context<'_>, _id: OpId, op: &Op, state: &State) {
        let (buffer, write) = match op.kind {
            OpKind::HostRead { buffer } => (buffer, false),
            // Freeing host memory a copy still uses is as bad as writing it.
            OpKind::HostWrite { buffer } | OpKind::Release { buffer, .. } => (buffer, true),
            // `def cpu(self)` returning it: the caller reads it as it would a tensor's `cpu()`.
            OpKind::Escape {
                buffer,
                kind: EscapeKind::Caller,
            } if cx.body.returns_to_host => (buffer, false),
            _ => return,
        };
        let returned = matches!(op.kind, OpKind::Escape { .. });
        let Some(b) = state.buffer(buffer) else {
            return;
        };
        let memory = cx.body.buffer(buffer).memory;
        if returned && memory == Memory::Device {
            return;
        }
        let pending = if write {
            // Only pinned sources are read by the copy asynchronously; pageable ones are staged
            // before the copy call returns.
            if memory != Memory::PinnedHost {
                return;
            }
            b.reads
                .iter()
                .chain(&b.writes)
                .find(|(_, a)| !state.host_ordered(*a))
                .copied()
        } else {
            b.writes
                .iter()
                .find(|(_, a)| !state.host_ordered(*a))
                .copied()
        };
        let Some((stream, access)) = pending else {
            return;
        };
        let name = cx.buffer_name(buffer).to_string();
        let s = cx.stream_name(stream).to_string();
        let (message, label, help) = if write {
            (
                format!("`{name}` is written on the host while a non-blocking copy on {s} may still be reading it: the device can receive the new values"),
                format!("copied to the device on {s} here"),
                format!("synchronize the copy first (record an event after it on {s} and call `event.synchronize()`), or copy from a fresh pinned buffer"),
            )
        } else if returned {
            let method = &cx.body.name;
            (
                format!("`{name}` is returned by `{method}()` before the non-blocking copy on {s} that fills it has finished: callers of `.{method}()` read the result on the host at once, as they would a tensor's"),
                format!("copied from the device on {s} here"),
                format!("finish the copy before returning: record an event on {s} after it and call `event.synchronize()`, or copy with `non_blocking=False`"),
            )
        } else {
            (
                format!("`{name}` is read on the host before the non-blocking copy on {s} that fills it has finished: the host can see stale values"),
                format!("copied from the device on {s} here"),
                format!("record an event on {s} after the copy and call `event.synchronize()` before reading (or synchronize {s} itself)"),
            )
        };
        let mut finding = Finding {
            fix: None,
            code: "SL007",
            severity: Severity::Error,
            message,
            span: op.span,
            labels: vec![Label {
                span: cx.span(access),
                message: label,
            }],
            help: Some(help),
        };
        cx.name_the_skipping_test(&mut finding, access, |k| {
            matches!(
                k,
                OpKind::SyncStream { .. } | OpKind::SyncEvent { .. } | OpKind::SyncDevice
            )
        });
        cx.report_once(buffer, finding);
    }
}

//! SL009 cuda-in-dataloader-worker: device work in code that runs in a process where the device
//! must not be used (forked data-loading workers cannot initialise CUDA).

use streamlint_graph::{Body, Memory, Op, OpId, OpKind, Production, Span, State, StreamOrigin};

use crate::{Context, Finding, Rule, Severity, Subject};

pub struct CudaInDataloaderWorker;

impl Rule for CudaInDataloaderWorker {
    fn code(&self) -> &'static str {
        "SL009"
    }

    fn applies_to(&self, body: &Body) -> bool {
        // Worker-process code only.
        body.device_forbidden.is_some()
    }

    fn visit(&self, cx: &mut Context<'_>, _id: OpId, op: &Op, _state: &State) {
        let OpKind::Produce { buffer, how, .. } = op.kind else {
            return;
        };
        let explicit = matches!(how, Production::HostToDevice { .. } | Production::Allocate);
        if explicit && cx.body.buffer(buffer).memory == Memory::Device {
            self.report(cx, op.span, "puts a tensor on the device");
        }
    }

    fn finish(&self, cx: &mut Context<'_>) {
        let body = cx.body;
        let streams: Vec<Span> = body
            .streams
            .iter()
            .filter(|s| matches!(s.origin, StreamOrigin::Created | StreamOrigin::Temporary))
            .filter_map(|s| s.span)
            .collect();
        let events: Vec<Span> = body.events.iter().filter_map(|e| e.created).collect();
        for span in streams {
            self.report(cx, span, "creates a CUDA stream");
        }
        for span in events {
            self.report(cx, span, "creates a CUDA event");
        }
    }
}

impl CudaInDataloaderWorker {
    fn report(&self, cx: &mut Context<'_>, span: Span, what: &str) {
        let Some(reason) = cx.body.device_forbidden.clone() else {
            return;
        };
        // Where the loader's `num_workers` is not seen, the contract decides: a warning.
        let severity = if reason.assumed {
            Severity::Warning
        } else {
            Severity::Error
        };
        cx.report_about(Subject::Span(span), Finding {
            fix: None,
            code: "SL009",
            severity,
            message: format!("this {what} in {}: CUDA cannot be initialised in forked worker processes", reason.why),
            span,
            labels: Vec::new(),
            help: Some("keep worker code on the CPU: return CPU tensors, let `DataLoader(pin_memory=True)` pin them, and move them to the device in the training loop".into()),
        });
    }
}

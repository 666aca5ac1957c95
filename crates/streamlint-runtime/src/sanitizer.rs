//! Reading the reports of PyTorch's CUDA sanitizer (CSAN, `TORCH_CUDA_SANITIZER=1`) from a
//! program's stderr.
//!
//! Each race is printed by `UnsynchronizedAccessError.__str__` in `torch/cuda/_sanitizer.py`:
//!
//! ```text
//! ============================
//! CSAN detected a possible data race on tensor with data pointer 140245521268736
//! Access by stream 94262350345536 during kernel:
//! aten::mul.Tensor(Tensor self, Tensor other) -> Tensor
//! reading from argument(s) self
//! With stack trace:
//!   File "train.py", line 17, in step
//!     probs = logits * 2
//!
//! Previous access by stream 94262351051264 during kernel:
//! aten::fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)
//! writing to argument(s) self, and to the output
//! With stack trace:
//!   File "train.py", line 15, in step
//!     logits.fill_(1.0)
//!
//! Tensor was allocated with stack trace:
//!   File "train.py", line 12, in step
//!     logits = torch.empty(n, device="cuda")
//! ```
//!
//! (or `Trace for tensor allocation not found.` instead of the last section). Stack frames are
//! formatted by Python's `traceback`, whose details vary between versions (newer ones add lines
//! of `^~~` markers), so the reader is tolerant: it takes what it recognises (the section
//! headers and `File "…", line N, in f` frames) and skips every other line.

/// One frame of a stack trace (also as the lifetime checker writes it).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct Frame {
    pub file: String,
    pub line: u32,
    pub function: String,
}

/// One side of a race: a kernel's access on a stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub stream: String,
    /// The operator's schema (`aten::mul.Tensor(...) -> Tensor`).
    pub operator: String,
    /// `reading from argument(s) self` / `writing to ...`.
    pub kind: String,
    /// Outermost call first, as Python prints it.
    pub frames: Vec<Frame>,
}

/// One reported race.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Race {
    pub data_ptr: String,
    pub current: Access,
    pub previous: Access,
    /// Empty when the sanitizer did not see the allocation.
    pub allocation: Vec<Frame>,
}

impl Race {
    /// Every frame of the report: both accesses and the allocation.
    pub fn frames(&self) -> impl Iterator<Item = &Frame> {
        self.current
            .frames
            .iter()
            .chain(&self.previous.frames)
            .chain(&self.allocation)
    }
}

const START: &str = "CSAN detected a possible data race on tensor with data pointer ";

/// Where the reader is inside a report.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Section {
    Current,
    Previous,
    Allocation,
}

/// Every race reported in `text`, in order.
pub fn parse(text: &str) -> Vec<Race> {
    let mut races = Vec::new();
    let mut race: Option<Race> = None;
    let mut section = Section::Current;
    for raw in text.lines() {
        let line = raw.trim_end();
        let trimmed = line.trim_start();
        if let Some(ptr) = trimmed.strip_prefix(START) {
            races.extend(race.take());
            race = Some(Race {
                data_ptr: ptr.trim().to_string(),
                ..Race::default()
            });
            section = Section::Current;
            continue;
        }
        let Some(r) = race.as_mut() else { continue };
        if let Some(stream) = stream_header(trimmed, "Access by stream ") {
            r.current.stream = stream;
            section = Section::Current;
        } else if let Some(stream) = stream_header(trimmed, "Previous access by stream ") {
            r.previous.stream = stream;
            section = Section::Previous;
        } else if trimmed.starts_with("Tensor was allocated with stack trace") {
            section = Section::Allocation;
        } else if trimmed.starts_with("Trace for tensor allocation not found") {
            races.extend(race.take());
        } else if let Some(frame) = frame(trimmed) {
            match section {
                Section::Current => r.current.frames.push(frame),
                Section::Previous => r.previous.frames.push(frame),
                Section::Allocation => r.allocation.push(frame),
            }
        } else if section == Section::Allocation
            && !line.is_empty()
            && !line.starts_with(char::is_whitespace)
        {
            // The allocation trace is the last section: an unindented line ends the report.
            races.extend(race.take());
        } else if section != Section::Allocation && !trimmed.is_empty() {
            let access = match section {
                Section::Previous => &mut r.previous,
                _ => &mut r.current,
            };
            if trimmed.starts_with("reading from") || trimmed.starts_with("writing to") {
                access.kind = trimmed.to_string();
            } else if access.operator.is_empty() && access.frames.is_empty() && !is_noise(trimmed) {
                access.operator = trimmed.to_string();
            }
        }
    }
    races.extend(race);
    races
}

/// `Access by stream 123 during kernel:` → `123`.
fn stream_header(line: &str, prefix: &str) -> Option<String> {
    let rest = line.strip_prefix(prefix)?;
    let stream = rest.split_whitespace().next()?;
    Some(stream.trim_end_matches(':').to_string())
}

/// `File "train.py", line 17, in step` → the frame.
fn frame(line: &str) -> Option<Frame> {
    let rest = line.strip_prefix("File \"")?;
    let (file, rest) = rest.split_once("\", line ")?;
    let (number, function) = match rest.split_once(", in ") {
        Some((n, f)) => (n, f.trim()),
        None => (rest, ""),
    };
    Some(Frame {
        file: file.to_string(),
        line: number.trim().parse().ok()?,
        function: function.to_string(),
    })
}

/// Lines of a report that are neither an operator nor an access kind.
fn is_noise(line: &str) -> bool {
    line.starts_with("With stack trace") || line.starts_with("====")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_RACES: &str = include_str!("testdata/csan_two_races.txt");
    const NO_ALLOCATION: &str = include_str!("testdata/csan_no_allocation_trace.txt");
    /// The stderr of a program with two races run under PyTorch 2.11's sanitizer on an H200
    /// (each race caught and the program continued).
    const RECORDED: &str = include_str!("testdata/csan_recorded_h200.txt");

    #[test]
    fn a_report_gives_both_accesses_and_the_allocation() {
        let races = parse(TWO_RACES);
        assert_eq!(races.len(), 2);
        let r = &races[0];
        assert_eq!(r.data_ptr, "140245521268736");
        assert_eq!(r.current.stream, "94262350345536");
        assert_eq!(
            r.current.operator,
            "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor"
        );
        assert_eq!(r.current.kind, "reading from argument(s) self");
        assert_eq!(r.previous.stream, "94262351051264");
        assert_eq!(
            r.previous.kind,
            "writing to argument(s) self, and to the output"
        );
        let user = |frames: &[Frame]| -> Vec<(String, u32, String)> {
            frames
                .iter()
                .filter(|f| f.file.ends_with("train.py"))
                .map(|f| (f.file.clone(), f.line, f.function.clone()))
                .collect()
        };
        assert_eq!(
            user(&r.current.frames),
            [
                ("train.py".into(), 30, "<module>".into()),
                ("train.py".into(), 17, "step".into())
            ]
        );
        assert_eq!(
            user(&r.previous.frames),
            [
                ("train.py".into(), 30, "<module>".into()),
                ("train.py".into(), 15, "step".into())
            ]
        );
        assert_eq!(
            user(&r.allocation),
            [
                ("train.py".into(), 30, "<module>".into()),
                ("train.py".into(), 12, "step".into())
            ]
        );
        // Frames inside PyTorch are kept; callers decide which files are theirs.
        assert!(r
            .current
            .frames
            .iter()
            .any(|f| f.file.ends_with("torch/cuda/_sanitizer.py")));
        assert_eq!(races[1].current.kind, "writing to argument(s) self");
        assert_eq!(races[1].previous.kind, "reading from argument(s) self");
    }

    /// The traceback Python prints after the report (the raised `CUDASanitizerErrors`) is not
    /// part of the allocation trace.
    #[test]
    fn the_traceback_after_a_report_is_not_read_into_it() {
        let races = parse(TWO_RACES);
        assert!(races[1].allocation.iter().all(|f| f.line != 99));
        assert_eq!(races[1].allocation.len(), 2);
    }

    #[test]
    fn a_report_without_an_allocation_trace_ends_at_its_notice() {
        let races = parse(NO_ALLOCATION);
        assert_eq!(races.len(), 1);
        assert!(races[0].allocation.is_empty());
        assert_eq!(races[0].current.frames.len(), 2);
        assert_eq!(races[0].previous.frames.len(), 1);
        assert_eq!(races[0].previous.frames[0].function, "worker");
    }

    #[test]
    fn a_recorded_report_is_read() {
        let races = parse(RECORDED);
        assert_eq!(races.len(), 2);
        let in_program = |frames: &[Frame]| -> Vec<(u32, String)> {
            frames
                .iter()
                .filter(|f| f.file == "/tmp/u/train.py")
                .map(|f| (f.line, f.function.clone()))
                .collect()
        };
        let first = &races[0];
        assert_eq!(first.current.stream, "0");
        assert_eq!(first.previous.stream, "693366992");
        assert_eq!(
            in_program(&first.current.frames),
            [(29, "<module>".into()), (11, "step".into())]
        );
        assert_eq!(
            in_program(&first.previous.frames),
            [(29, "<module>".into()), (10, "step".into())]
        );
        assert_eq!(
            in_program(&first.allocation),
            [(29, "<module>".into()), (7, "step".into())]
        );
        assert_eq!(first.current.frames.len(), 6);
        assert_eq!(first.allocation.len(), 8);
        let second = &races[1];
        assert_eq!(
            second.previous.operator,
            "aten::fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)"
        );
        assert_eq!(
            in_program(&second.current.frames)[1],
            (24, "wait_first".into())
        );
    }

    #[test]
    fn text_without_reports_has_no_races() {
        assert!(parse("").is_empty());
        assert!(parse("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nValueError: x\n").is_empty());
    }

    #[test]
    fn frames_are_read_from_python_traceback_lines() {
        assert_eq!(
            frame("File \"/w/a b.py\", line 7, in <lambda>"),
            Some(Frame {
                file: "/w/a b.py".into(),
                line: 7,
                function: "<lambda>".into()
            })
        );
        assert_eq!(frame("File \"a.py\", line x, in f"), None);
        assert_eq!(frame("probs = logits * 2"), None);
    }
}

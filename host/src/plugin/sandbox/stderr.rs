//! A plugin's standard error, kept for the operator. A plugin that panics
//! (in Go, Rust or JavaScript) writes why to stderr and then traps; without
//! this the trap would arrive as `unreachable executed` and nothing else.
//!
//! Bounded and never blocking: only the last [`StderrTail::new`] bytes are
//! kept, and a write never fails, so a chatty plugin loses old text instead
//! of trapping. What is kept is the plugin's data: [`StderrTail::last_words`]
//! turns it into one bounded line without control characters before it goes
//! into an error message.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Lines shown, starting at a panic's if there is one.
const LINES: usize = 3;

#[derive(Clone)]
pub(super) struct StderrTail {
    kept: Arc<Mutex<VecDeque<u8>>>,
    capacity: usize,
}

impl StderrTail {
    pub(super) fn new(capacity: usize) -> Self {
        StderrTail { kept: Arc::new(Mutex::new(VecDeque::with_capacity(capacity))), capacity }
    }

    fn push(&self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(self.capacity)..];
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let overflow = (kept.len() + data.len()).saturating_sub(self.capacity);
        kept.drain(..overflow);
        kept.extend(data);
    }

    /// What the plugin last wrote, as one line of at most `max` characters:
    /// from the first line that mentions a panic (and the next ones, for the
    /// message Rust prints below it), else the last lines; lines joined with
    /// ` | `, control characters as spaces. `None` when it wrote nothing.
    pub(super) fn last_words(&self, max: usize) -> Option<String> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let (front, back) = kept.as_slices();
        let text = String::from_utf8_lossy(&[front, back].concat()).into_owned();
        let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        let start = match lines.iter().position(|l| l.contains("panic")) {
            Some(panic) => panic,
            None => lines.len().saturating_sub(LINES),
        };
        let words: String = lines.iter().skip(start).take(LINES).copied().collect::<Vec<_>>().join(" | ");
        let words: String = words.chars().map(|c| if c.is_control() { ' ' } else { c }).take(max).collect();
        (!words.is_empty()).then_some(words)
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    // Written synchronously (not through wasmtime's background writer), so
    // that what a plugin wrote just before it trapped is there to read.
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl AsyncWrite for StderrTail {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        self.push(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for StderrTail {
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl OutputStream for StderrTail {
    fn write(&mut self, data: Bytes) -> StreamResult<()> {
        self.push(&data);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Any amount: older text makes room.
        Ok(64 << 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tail_is_kept() {
        let tail = StderrTail::new(8);
        tail.push(b"0123456789");
        tail.push(b"ab");
        assert_eq!(tail.last_words(100).unwrap(), "456789ab");
    }

    #[test]
    fn a_go_panic_is_shown_from_its_first_line() {
        let tail = StderrTail::new(4096);
        tail.push(b"log line\npanic: index out of range [3] with length 2\n\ngoroutine 1 [running]:\nmain.f()\n");
        assert_eq!(
            tail.last_words(300).unwrap(),
            "panic: index out of range [3] with length 2 | goroutine 1 [running]: | main.f()"
        );
    }

    #[test]
    fn a_rust_panic_shows_its_message_and_control_characters_are_spaces() {
        let tail = StderrTail::new(4096);
        tail.push(b"\nthread '<unnamed>' panicked at src/lib.rs:4:5:\nno \x1b[31mway\nnote: run with RUST_BACKTRACE=1");
        let words = tail.last_words(200).unwrap();
        assert_eq!(
            words,
            "thread '<unnamed>' panicked at src/lib.rs:4:5: | no  [31mway | note: run with RUST_BACKTRACE=1"
        );
        assert_eq!(tail.last_words(12).unwrap(), "thread '<unn");
    }

    #[test]
    fn without_a_panic_the_last_lines_and_nothing_for_silence() {
        let tail = StderrTail::new(4096);
        assert_eq!(tail.last_words(100), None);
        tail.push(b"one\ntwo\nthree\nfour\n");
        assert_eq!(tail.last_words(100).unwrap(), "two | three | four");
    }
}

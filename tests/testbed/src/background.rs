//! A stoppable loop on the harness runtime, shared by the simulators.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// A periodic task on [`crate::runtime()`] (so it outlives the test runtime
/// that started it). Dropping the handle aborts the task; [`Self::stop`]
/// waits for the current round to finish first.
#[derive(Debug)]
pub(crate) struct Background {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    last_error: Arc<Mutex<Option<String>>>,
}

impl Background {
    /// Runs `round()` every `interval` until stopped. Errors are kept as
    /// [`Self::last_error`] and logged to stderr when they change; the loop
    /// goes on (like a controller's requeue).
    pub(crate) fn spawn<F, Fut>(name: &'static str, interval: Duration, round: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = crate::Result<()>> + Send,
    {
        Self::spawn_woken(name, interval, Arc::new(Notify::new()), round)
    }

    /// Like [`Self::spawn`], and also runs the next round as soon as `wake`
    /// is notified (a watch event), so `interval` only paces retries.
    pub(crate) fn spawn_woken<F, Fut>(name: &'static str, interval: Duration, wake: Arc<Notify>, mut round: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = crate::Result<()>> + Send,
    {
        let (stop, mut stopped) = watch::channel(false);
        let last_error = Arc::new(Mutex::new(None::<String>));
        let errors = last_error.clone();
        let task = crate::env::runtime().spawn(async move {
            loop {
                let result = round().await;
                {
                    let mut last = crate::process::lock_unpoisoned(&errors);
                    match result {
                        Ok(()) => *last = None,
                        Err(e) => {
                            let text = e.to_string();
                            if last.as_deref() != Some(text.as_str()) {
                                eprintln!("testbed {name}: {text}");
                            }
                            *last = Some(text);
                        }
                    }
                }
                tokio::select! {
                    _ = stopped.changed() => break,
                    _ = tokio::time::sleep(interval) => {}
                    _ = wake.notified() => {}
                }
            }
        });
        Self { stop, task: Some(task), last_error }
    }

    /// The error of the latest round, if it failed.
    pub(crate) fn last_error(&self) -> Option<String> {
        crate::process::lock_unpoisoned(&self.last_error).clone()
    }

    /// Signals the loop and waits for it to end.
    pub(crate) async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

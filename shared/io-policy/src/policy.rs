//! Retries, backoff, attempt timeouts and the deadline, for every AWS call.
//!
//! A [`Budget`] is what one invocation may spend: the [`Policy`], the instant work must stop (the
//! invocation's deadline less the policy's margin), and a [`Tally`] of requests sent. Every call
//! goes through [`Budget::call`] (one request, retried) or an [`Attempts`] loop (a request whose
//! payload shrinks between attempts, like `BatchWriteItem`'s unprocessed items):
//!
//! - an attempt starts only before the stop instant, and is cut off there, or after
//!   [`Policy::attempt_timeout`], whichever comes first (a cut-off attempt is transient);
//! - a transient failure is retried after a jittered exponential backoff, unless the attempts are
//!   used up or the backoff would end past the stop instant;
//! - systemic and record-permanent failures are returned at once.
//!
//! The SDK's own retries must be off ([`crate::without_sdk_retries`]), so that this policy is the
//! only one and the deadline bounds everything.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use futures_util::stream::{FuturesUnordered, Stream};

use crate::deadline::Deadline;
use crate::failure::{Failure, FailureKind};
use crate::window::Window;

/// How calls are retried and bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// The backoff ceiling before the first retry.
    pub base_delay: Duration,
    /// The largest backoff ceiling.
    pub max_delay: Duration,
    /// The longest one attempt may take before it is abandoned (and retried).
    pub attempt_timeout: Duration,
    /// How long before the invocation's deadline work stops, to leave time to report.
    pub margin: Duration,
    /// Requests in flight at once at the start, for callers that send several.
    pub concurrency: usize,
    /// The most requests in flight the window ([`Window`]) may grow to while answers are clean;
    /// equal to `concurrency` for a fixed window.
    pub max_concurrency: usize,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            max_attempts: 8,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(5),
            attempt_timeout: Duration::from_secs(10),
            margin: Duration::from_secs(2),
            concurrency: 4,
            max_concurrency: 16,
        }
    }
}

impl Policy {
    /// The wait before retry `retry` (1 for the first), given `unit`, a uniform random number in
    /// `[0, 1)`: full jitter under a ceiling of `base_delay × 2^(retry-1)`, at most `max_delay`.
    pub fn backoff(&self, retry: u32, unit: f64) -> Duration {
        let exp = retry.saturating_sub(1).min(30);
        let ceiling = self.base_delay.saturating_mul(1_u32 << exp).min(self.max_delay);
        ceiling.mul_f64(unit.clamp(0.0, 1.0))
    }

    /// The budget of an invocation that ends at `deadline`: work stops [`Policy::margin`]
    /// before it.
    pub fn budget(self, deadline: Deadline) -> Budget {
        Budget {
            policy: self,
            stop_at: deadline.less(self.margin),
            tally: Tally::default(),
            window: Window::new(self.concurrency, self.max_concurrency),
        }
    }

    /// The budget of one operation outside Lambda (a page read, a tool's call): work stops
    /// `time` from now, with no margin, since no response has to be written after it.
    pub fn within(self, time: Duration) -> Budget {
        Budget {
            policy: self,
            stop_at: Deadline::after(time).less(Duration::ZERO),
            tally: Tally::default(),
            window: Window::new(self.concurrency, self.max_concurrency),
        }
    }
}

/// Requests sent under a budget, counted as they are sent (by concurrent calls too).
#[derive(Debug, Default)]
pub struct Tally {
    requests: AtomicU64,
    retries: AtomicU64,
}

impl Tally {
    /// Requests sent, first attempts and retries alike.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Requests that were retries.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    fn sent(&self, retry: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if retry {
            self.retries.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What one invocation may spend: the policy, the instant to stop at, and the tally.
#[derive(Debug)]
pub struct Budget {
    /// The policy.
    pub policy: Policy,
    /// No attempt starts, and no attempt or backoff runs, past this instant.
    pub stop_at: Instant,
    /// The requests sent under this budget.
    pub tally: Tally,
    /// How many requests may be in flight, adapted to throttling.
    pub window: Window,
}

impl Budget {
    /// A fresh attempt loop for one request.
    pub fn attempts(&self) -> Attempts<'_> {
        Attempts { budget: self, made: 0 }
    }

    /// Sends a request made by `attempt` until it succeeds, fails for good, or the policy gives
    /// up; `attempt` is called once per attempt and classifies its own errors.
    pub async fn call<T, Fut>(&self, mut attempt: impl FnMut() -> Fut) -> Result<T, Failure>
    where
        Fut: Future<Output = Result<T, Failure>>,
    {
        let mut attempts = self.attempts();
        let mut last = None;
        loop {
            attempts.next(last.take()).await?;
            // Boxed: an SDK call's future is large, and every caller's future would hold it.
            match attempts.run(Box::pin(attempt())).await {
                Ok(value) => return Ok(value),
                Err(failure) => last = Some(failure),
            }
        }
    }

    /// Sends `request`, then what each answer left undone (`BatchGetItem`'s unprocessed keys),
    /// until nothing is left: a re-send counts as a retry, with the same backoff and bounds. `send`
    /// makes one attempt and returns what it got and the rest, if any; what every answer got is
    /// returned in order. `what` names the request in the failure when the rest stays undone.
    pub async fn drain<R, T, Fut>(
        &self,
        what: &str,
        mut request: R,
        mut send: impl FnMut(R) -> Fut,
    ) -> Result<Vec<T>, Failure>
    where
        R: Clone,
        Fut: Future<Output = Result<(T, Option<R>), Failure>>,
    {
        let mut got = Vec::new();
        let mut attempts = self.attempts();
        let mut last = None;
        loop {
            attempts.next(last.take()).await?;
            // Boxed: an SDK call's future is large, and every caller's future would hold it.
            match attempts.run(Box::pin(send(request.clone()))).await {
                Ok((answer, rest)) => {
                    got.push(answer);
                    match rest {
                        None => return Ok(got),
                        Some(rest) => {
                            request = rest;
                            last =
                                Some(Failure::transient(format!("{what}: part of it was left unprocessed")));
                        }
                    }
                }
                Err(failure) => last = Some(failure),
            }
        }
    }

    /// Runs `tasks` (each one request's attempts, or a few requests in turn), as many at once as
    /// the window's size when each starts (it may have grown or shrunk meanwhile), starting the
    /// next as one ends; their outputs, in the order they end. Their requests also wait for
    /// places in the window (`Window::enter`), so that after a cut no more than its new size
    /// are on the wire, and a task that is backing off does not hold one.
    ///
    /// Following the window here, and not only at the wire, matters under throttling: every task
    /// started spends its own attempts, so starting more tasks than the window admits would use
    /// up their retries waiting, and end the invocation at a checkpoint a smaller window reaches
    /// the end from.
    pub async fn in_window<T, F: Future<Output = T>>(&self, tasks: impl IntoIterator<Item = F>) -> Vec<T> {
        self.in_window_as_ready(futures_util::stream::iter(tasks)).await
    }

    /// [`Budget::in_window`] of tasks that become ready one by one (a plan's writes, made while
    /// the batch is still being planned): a task starts once it is ready and the window admits
    /// it; the outputs come once the stream has ended and every task with it.
    pub async fn in_window_as_ready<T, F: Future<Output = T>>(&self, tasks: impl Stream<Item = F>) -> Vec<T> {
        let mut waiting = std::pin::pin!(tasks);
        let mut ended = false;
        let mut running = FuturesUnordered::new();
        let mut done = Vec::new();
        std::future::poll_fn(|cx| {
            loop {
                // Start what the window admits of the tasks ready now.
                while !ended && (running.is_empty() || running.len() < self.window.size()) {
                    match waiting.as_mut().poll_next(cx) {
                        Poll::Ready(Some(task)) => running.push(task),
                        Poll::Ready(None) => ended = true,
                        Poll::Pending => break,
                    }
                }
                match running.poll_next_unpin(cx) {
                    Poll::Ready(Some(output)) => done.push(output),
                    // Nothing runs: done once the stream has ended; else it will wake us.
                    Poll::Ready(None) if ended => return Poll::Ready(()),
                    Poll::Ready(None) | Poll::Pending => return Poll::Pending,
                }
            }
        })
        .await;
        done
    }

    /// Whether the stop instant has passed.
    pub fn expired(&self) -> bool {
        Instant::now() >= self.stop_at
    }
}

/// The attempts of one request: [`Attempts::next`] before each, [`Attempts::run`] for each.
#[derive(Debug)]
pub struct Attempts<'b> {
    budget: &'b Budget,
    made: u32,
}

impl Attempts<'_> {
    /// Gets ready for the next attempt, given how the last one failed (`None` before the first):
    /// returns a systemic or record-permanent failure as it is; for a transient one, backs off,
    /// or gives up when the attempts are used up or there is no time for the wait and an attempt.
    pub async fn next(&mut self, last: Option<Failure>) -> Result<(), Failure> {
        let policy = &self.budget.policy;
        if let Some(failure) = last {
            if failure.kind != FailureKind::Transient {
                return Err(failure);
            }
            if self.made >= policy.max_attempts {
                return Err(Failure::transient(format!(
                    "{} (gave up after {} attempts)",
                    failure.message, self.made
                )));
            }
            let delay = policy.backoff(self.made, fastrand::f64());
            if Instant::now() + delay >= self.budget.stop_at {
                return Err(Failure::transient(format!(
                    "{}; no time to retry before the invocation deadline",
                    failure.message
                )));
            }
            tracing::warn!(
                attempt = self.made,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                reason = %failure.message,
                "retrying"
            );
            tokio::time::sleep(delay).await;
        } else if self.budget.expired() {
            return Err(Failure::transient("no time left before the invocation deadline"));
        }
        Ok(())
    }

    /// Counts an attempt made of several requests, each sent through [`Budget::call`] (a
    /// read-merge-write round), so that [`Attempts::next`] bounds and backs off the rounds.
    pub fn round(&mut self) {
        self.made += 1;
    }

    /// Runs one attempt made of `requests` sent together in one place of the window (as the
    /// writes of one batch request would go), each cut off at the attempt timeout or the stop
    /// instant on its own, so that one slow request fails alone and the others' answers stand;
    /// counts each. Their outcomes, in order; `Err` when no request could be sent (no time left).
    pub async fn run_each<T>(
        &mut self,
        requests: Vec<impl Future<Output = Result<T, Failure>>>,
    ) -> Result<Vec<Result<T, Failure>>, Failure> {
        if Instant::now() >= self.budget.stop_at {
            return Err(Failure::transient("no time left before the invocation deadline"));
        }
        let Ok(_slot) = tokio::time::timeout_at(self.budget.stop_at.into(), self.budget.window.enter()).await
        else {
            return Err(Failure::transient(
                "no time left before the invocation deadline (waiting for a place in the write window)",
            ));
        };
        let limit = self
            .budget
            .stop_at
            .saturating_duration_since(Instant::now())
            .min(self.budget.policy.attempt_timeout);
        for _ in 0..requests.len() {
            self.budget.tally.sent(self.made > 0);
        }
        self.made += 1;
        let answers = futures_util::future::join_all(requests.into_iter().map(|request| async move {
            tokio::time::timeout(limit, request).await.unwrap_or_else(|_| {
                Err(Failure::transient(format!(
                    "the attempt was cut off after {} ms (attempt timeout or deadline)",
                    limit.as_millis()
                )))
            })
        }))
        .await;
        if answers.iter().any(|a| a.as_ref().is_err_and(|f| f.throttled)) {
            self.budget.window.throttled(Instant::now());
        } else if answers.iter().all(Result::is_ok) {
            self.budget.window.clean();
        }
        Ok(answers)
    }

    /// Runs one attempt, cut off at the attempt timeout or the stop instant; counts it.
    pub async fn run<T>(&mut self, attempt: impl Future<Output = Result<T, Failure>>) -> Result<T, Failure> {
        let now = Instant::now();
        if now >= self.budget.stop_at {
            return Err(Failure::transient("no time left before the invocation deadline"));
        }
        // A place in the window first; waiting for it is bounded by the stop instant too.
        let Ok(_slot) = tokio::time::timeout_at(self.budget.stop_at.into(), self.budget.window.enter()).await
        else {
            return Err(Failure::transient(
                "no time left before the invocation deadline (waiting for a place in the write window)",
            ));
        };
        let now = Instant::now();
        let limit =
            self.budget.stop_at.saturating_duration_since(now).min(self.budget.policy.attempt_timeout);
        self.budget.tally.sent(self.made > 0);
        self.made += 1;
        match tokio::time::timeout(limit, attempt).await {
            Ok(result) => {
                match &result {
                    Ok(_) => self.budget.window.clean(),
                    Err(failure) if failure.throttled => self.budget.window.throttled(Instant::now()),
                    Err(_) => {}
                }
                result
            }
            Err(_) => Err(Failure::transient(format!(
                "the attempt was cut off after {} ms (attempt timeout or deadline)",
                limit.as_millis()
            ))),
        }
    }
}

#[cfg(test)]
mod tests;

/// A policy and how long one operation may take under it: what a client whose every call is an
/// operation of its own holds (a grid's page, a counter's read), each call's budget made from it.
#[derive(Debug, Clone, Copy)]
pub struct Bounded {
    policy: Policy,
    time: Duration,
}

impl Bounded {
    /// Each operation under `policy`, bounded by `time`.
    pub fn new(policy: Policy, time: Duration) -> Bounded {
        Bounded { policy, time }
    }

    /// How long each operation may take.
    pub fn time(&self) -> Duration {
        self.time
    }

    /// The policy of each operation.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The budget of one operation, starting now ([`Policy::within`]).
    pub fn budget(self) -> Budget {
        self.policy.within(self.time)
    }
}

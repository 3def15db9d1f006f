//! Tests of the I/O policy: backoff, retries of transient failures, and what is not retried.

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::{Budget, Policy};
use crate::deadline::Deadline;
use crate::failure::{Failure, FailureKind};

fn quick() -> Policy {
    Policy {
        max_attempts: 4,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(4),
        attempt_timeout: Duration::from_millis(200),
        margin: Duration::from_millis(10),
        concurrency: 1,
        max_concurrency: 1,
    }
}

/// A budget of [`quick`]'s policy and ten seconds: more than any of these tests takes.
fn ten_seconds() -> Budget {
    quick().budget(Deadline::after(Duration::from_secs(10)))
}

/// `budget.call(…)` of `attempt`, given each attempt's number from 1.
async fn numbered<T, Fut>(budget: &Budget, attempt: impl Fn(u32) -> Fut) -> Result<T, Failure>
where
    Fut: Future<Output = Result<T, Failure>>,
{
    let calls = Cell::new(0);
    budget
        .call(|| {
            calls.set(calls.get() + 1);
            attempt(calls.get())
        })
        .await
}

#[test]
fn backoff_doubles_up_to_the_cap_and_jitter_scales_it() {
    let p = Policy {
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_secs(1),
        ..Policy::default()
    };
    let ceilings: Vec<u128> = (1..=8).map(|n| p.backoff(n, 1.0).as_millis()).collect();
    assert_eq!(ceilings, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
    assert_eq!(p.backoff(3, 0.0), Duration::ZERO);
    assert_eq!(p.backoff(3, 0.5), Duration::from_millis(100));
    assert_eq!(p.backoff(u32::MAX, 7.0), Duration::from_secs(1));
}

#[tokio::test]
async fn transient_failures_are_retried_and_counted() {
    let budget = ten_seconds();
    let result =
        numbered(
            &budget,
            |n| async move { if n < 3 { Err(Failure::transient("throttled")) } else { Ok(n) } },
        )
        .await;
    assert_eq!(result, Ok(3));
    assert_eq!((budget.tally.requests(), budget.tally.retries()), (3, 2));
}

#[tokio::test]
async fn other_kinds_are_returned_at_once() {
    for kind in [FailureKind::Systemic, FailureKind::RecordPermanent] {
        let budget = ten_seconds();
        let result: Result<(), _> = budget.call(|| async move { Err(Failure::new(kind, "no")) }).await;
        assert_eq!(result.unwrap_err().kind, kind);
        assert_eq!(budget.tally.requests(), 1);
    }
}

#[tokio::test]
async fn attempts_are_bounded() {
    let budget = ten_seconds();
    let result: Result<(), _> = budget.call(|| async { Err(Failure::transient("503")) }).await;
    let failure = result.unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transient);
    assert!(failure.message.contains("gave up after 4 attempts"), "{failure}");
    assert_eq!(budget.tally.requests(), 4);
}

#[tokio::test]
async fn a_stalled_attempt_is_cut_off_and_retried() {
    let budget = ten_seconds();
    let result = numbered(&budget, |n| async move {
        if n == 1 {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        Ok::<_, Failure>("done")
    })
    .await;
    assert_eq!(result, Ok("done"));
    assert_eq!(budget.tally.retries(), 1);
}

#[tokio::test]
async fn nothing_runs_past_the_stop_instant() {
    // 300 ms to the deadline less a 100 ms margin: an attempt that never answers is cut off at
    // the stop instant (before its 200 ms attempt timeout twice over), and no retry starts.
    let policy =
        Policy { attempt_timeout: Duration::from_secs(30), margin: Duration::from_millis(100), ..quick() };
    let budget = policy.budget(Deadline::after(Duration::from_millis(300)));
    let result: Result<(), _> = budget
        .call(|| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        })
        .await;
    let failure = result.unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transient);
    assert!(failure.message.contains("cut off"), "{failure}");
    assert!(Instant::now() >= budget.stop_at);
    assert_eq!(budget.tally.requests(), 1);
}

#[tokio::test]
async fn rounds_of_several_requests_are_bounded_like_attempts() {
    let budget = quick().within(Duration::from_secs(60));
    let mut rounds = budget.attempts();
    let mut last = None;
    let mut made = 0;
    let failure = loop {
        if let Err(failure) = rounds.next(last.take()).await {
            break failure;
        }
        rounds.round();
        made += 1;
        last = Some(Failure::transient("changed by another writer"));
    };
    assert_eq!(made, quick().max_attempts);
    assert!(failure.message.contains("gave up after"), "{}", failure.message);
    // Rounds are not requests: their requests are counted by the calls inside them.
    assert_eq!(budget.tally.requests(), 0);
}

#[tokio::test]
async fn drain_sends_the_rest_until_nothing_is_left() {
    let budget = quick().within(Duration::from_secs(60));
    let sent = std::cell::RefCell::new(Vec::new());
    let got = budget
        .drain("BatchGetItem", vec![1, 2, 3], |keys: Vec<u32>| {
            sent.borrow_mut().push(keys.clone());
            async move {
                let (first, rest) = keys.split_at(1);
                Ok((first[0], (!rest.is_empty()).then(|| rest.to_vec())))
            }
        })
        .await
        .unwrap();
    assert_eq!(got, [1, 2, 3]);
    assert_eq!(*sent.borrow(), [vec![1, 2, 3], vec![2, 3], vec![3]]);
    assert_eq!((budget.tally.requests(), budget.tally.retries()), (3, 2));
}

#[tokio::test]
async fn drain_gives_up_when_the_rest_stays_undone() {
    let budget = quick().within(Duration::from_secs(60));
    let result = budget.drain("BatchGetItem", 7, |keys: u32| async move { Ok(((), Some(keys))) }).await;
    let failure = result.unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transient);
    assert!(failure.message.contains("left unprocessed"), "{failure}");
    assert!(failure.message.contains("gave up after 4 attempts"), "{failure}");
    assert_eq!(budget.tally.requests(), 4);
}

/// Tasks that arrive while others run start as soon as the window has room for them, never more
/// at once than its size, and every output comes back once the stream has ended. No timing: the
/// tasks hold until the test lets them go.
#[tokio::test]
async fn tasks_made_while_others_run_start_as_the_window_admits_them() {
    use std::rc::Rc;

    let policy = Policy { concurrency: 3, max_concurrency: 3, ..quick() };
    let budget = policy.budget(Deadline::after(Duration::from_secs(10)));
    let (send, receive) = tokio::sync::mpsc::unbounded_channel::<u32>();
    let receive =
        futures_util::stream::unfold(receive, |mut r| async move { r.recv().await.map(|n| (n, r)) });
    let gate = Rc::new(tokio::sync::Semaphore::new(0));
    let (started, running, peak) =
        (Rc::new(Cell::new(0_usize)), Rc::new(Cell::new(0_usize)), Rc::new(Cell::new(0_usize)));
    let tasks = futures_util::StreamExt::map(receive, |n| {
        let (gate, started, running, peak) =
            (Rc::clone(&gate), Rc::clone(&started), Rc::clone(&running), Rc::clone(&peak));
        async move {
            started.set(started.get() + 1);
            running.set(running.get() + 1);
            peak.set(peak.get().max(running.get()));
            gate.acquire().await.expect("the gate stays open").forget();
            running.set(running.get() - 1);
            n * 10
        }
    });
    let yield_a_while = || async {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    };
    let producer = async {
        // Five ready: the window starts three, and no more while they hold.
        for n in 0..5 {
            send.send(n).expect("the receiver lives");
        }
        yield_a_while().await;
        assert_eq!((started.get(), running.get()), (3, 3), "three of five started");
        // One lets go: the next starts, before the stream has ended.
        gate.add_permits(1);
        yield_a_while().await;
        assert_eq!((started.get(), running.get()), (4, 3), "one more started as one ended");
        // The rest come while those hold, then all may end.
        for n in 5..12 {
            send.send(n).expect("the receiver lives");
        }
        drop(send);
        gate.add_permits(11);
    };
    let ((), mut outputs) = tokio::join!(producer, budget.in_window_as_ready(tasks));
    outputs.sort_unstable();
    assert_eq!(outputs, (0..12).map(|n| n * 10).collect::<Vec<_>>());
    assert_eq!((started.get(), peak.get()), (12, 3), "every task ran, never more than three at once");
}

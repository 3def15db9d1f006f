//! The window's arithmetic, step by step.

use super::*;

#[test]
fn grows_by_one_per_window_of_clean_answers_up_to_the_cap() {
    let w = Window::new(4, 6);
    let mut sizes = Vec::new();
    for _ in 0..12 {
        w.clean();
        sizes.push(w.size());
    }
    // Each answer adds 1/size: 4 → 4.25 → 4.49 → 4.71 → 4.92 → 5.12 …, about one per window's
    // worth of answers; then capped.
    assert_eq!(sizes, [4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6, 6]);
    assert_eq!((w.peak(), w.cuts(), w.fixed()), (6, 0, false));
}

#[test]
fn halves_on_throttling_once_per_hold_and_never_below_one() {
    let w = Window::new(16, 16);
    assert!(w.fixed());
    let t0 = Instant::now();
    w.throttled(t0);
    assert_eq!((w.size(), w.cuts()), (16, 0), "a fixed window does not move");

    let w = Window::new(4, 16);
    #[rustfmt::skip]
    let steps: [(u64, usize, u64); 6] = [
        (0, 2, 1),     // halved
        (50, 2, 1),    // within the hold: the same burst
        (100, 1, 2),   // halved again
        (250, 1, 3),   // counted, but not below 1
        (260, 1, 3),
        (400, 1, 4),
    ];
    for (ms, size, cuts) in steps {
        w.throttled(t0 + Duration::from_millis(ms));
        assert_eq!((w.size(), w.cuts()), (size, cuts), "at {ms} ms");
    }
    w.clean();
    assert_eq!(w.size(), 2, "at 1, one clean answer is a window's worth");
}

#[test]
fn a_window_never_exceeds_its_cap_nor_starts_at_zero() {
    let w = Window::new(0, 0);
    assert_eq!((w.size(), w.fixed()), (1, true));
    let w = Window::new(8, 3);
    assert_eq!((w.size(), w.fixed()), (8, true));
}

#[tokio::test]
async fn no_more_requests_enter_than_the_window_holds() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let w = Window::new(2, 2);
    let (inside, most, entered) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    let request = || async {
        let _slot = w.enter().await;
        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        entered.fetch_add(1, Ordering::SeqCst);
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(2)).await;
        inside.fetch_sub(1, Ordering::SeqCst);
    };
    futures_util::future::join_all((0..9).map(|_| request())).await;
    assert_eq!((entered.into_inner(), most.into_inner()), (9, 2));

    // A window that grows lets the next request in at once.
    let w = Window::new(1, 4);
    let first = w.enter().await;
    w.clean();
    let second = tokio::time::timeout(Duration::from_secs(5), w.enter()).await;
    assert!(second.is_ok(), "the window grew to 2, so a second request enters");
    drop((first, second));
}

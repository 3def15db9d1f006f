//! Tests of how far each `Query` of the index phase reads.

use super::{TOMBSTONE_GROWTH, index_limit};

/// The queries a page of `want` entries takes behind a run of `tombstones` followed by entries,
/// by [`index_limit`], DynamoDB's 1 MB cap aside: each query reads its `Limit` in items.
fn queries_behind(tombstones: usize, want: usize) -> usize {
    let (mut read_tombstones, mut entries, mut queries) = (0, 0, 0);
    while entries < want + 1 {
        let limit = index_limit(want + 1 - entries, read_tombstones);
        queries += 1;
        let from_run = limit.min(tombstones - read_tombstones);
        read_tombstones += from_run;
        entries += limit - from_run;
    }
    queries
}

/// The bound docs/grid-view.md states: 1 + ⌈log₁₇((T + N + 1) / (N + 1))⌉, that is 1 + the
/// least k with (N + 1)·17^k ≥ T + N + 1.
fn documented_bound(tombstones: usize, want: usize) -> usize {
    let (mut reach, mut k) = (want + 1, 0);
    while reach < tombstones + want + 1 {
        reach *= 17;
        k += 1;
    }
    1 + k
}

#[test]
fn with_no_tombstone_a_query_asks_for_what_the_page_needs() {
    for need in [1, 51, 101] {
        assert_eq!(index_limit(need, 0), need);
    }
    assert_eq!(queries_behind(0, 50), 1);
}

#[test]
fn each_query_after_tombstones_reads_further_than_all_before() {
    assert_eq!(TOMBSTONE_GROWTH, 16, "docs/grid-view.md states the bound for 16");
    assert_eq!(index_limit(51, 51), 51 + 51 * 16);
    assert_eq!(index_limit(usize::MAX, 2), usize::MAX, "saturates");
}

#[test]
fn a_page_behind_tombstones_takes_the_documented_number_of_queries() {
    // (tombstones ahead, entries a page wants, queries)
    let cases = [
        (1, 50, 2),
        (50, 50, 2),
        (3_000, 50, 3),
        (3_000, 10, 3),
        (14_000, 50, 3),
        (3_000, 1, 4),
        (20_000, 50, 4),
        (3_000, 100, 3),
    ];
    for (tombstones, want, expected) in cases {
        let queries = queries_behind(tombstones, want);
        assert_eq!(queries, expected, "{tombstones} tombstones, a page of {want}");
        assert!(queries <= documented_bound(tombstones, want), "{tombstones} tombstones, a page of {want}");
    }
    for tombstones in (0..40_000).step_by(997) {
        for want in [1, 7, 50, 100] {
            let queries = queries_behind(tombstones, want);
            assert!(
                queries <= documented_bound(tombstones, want),
                "{tombstones} tombstones, a page of {want}"
            );
        }
    }
}

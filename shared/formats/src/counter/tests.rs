//! Tests for the counter keys.

use super::*;

#[test]
fn keys_are_built_and_parsed_back() {
    let layout = Sharding::new(8).unwrap();
    #[rustfmt::skip]
    let cases = [
        ("votes/alice", Some(3), "COUNTER#votes/alice#SHARD#3"),
        ("votes/alice", None, "COUNTER#votes/alice#TOTAL"),
        ("a#b%c", Some(0), "COUNTER#a%23b%25c#SHARD#0"),
        ("TOTAL", Some(12), "COUNTER#TOTAL#SHARD#12"),
    ];
    for (name, shard, key) in cases {
        let (built, parsed) = match shard {
            Some(k) => (layout.shard_key(name, k), CounterKey::Shard { name: name.to_owned(), shard: k }),
            None => (layout.total_key(name), CounterKey::Total { name: name.to_owned() }),
        };
        assert_eq!(built.unwrap(), key);
        assert_eq!(CounterKey::parse(key), Some(parsed), "{key}");
    }
}

#[test]
fn other_keys_are_not_counters() {
    for key in [
        "",
        "COUNTER",
        "COUNTER#x",
        "COUNTER##TOTAL",
        "COUNTER#x#SHARD#",
        "COUNTER#x#SHARD#01",
        "COUNTER#x#SHARD#-1",
        "COUNTER#x#SHARD#+1",
        "COUNTER#x#SHARD#1#2",
        "COUNTER#x#SHARD#99999999999",
        "COUNTER#x#TOTAL#1",
        "counter#x#TOTAL",
        "COUNTER#x%2#TOTAL",
        "ISSUE#af34",
    ] {
        assert_eq!(CounterKey::parse(key), None, "{key}");
    }
}

#[test]
fn bad_layouts_and_names_say_why() {
    assert_eq!(Sharding::new(0).unwrap_err().to_string(), "a counter needs 1 to 1000 shards, not 0");
    assert_eq!(Sharding::new(1001).unwrap_err(), ShardingError::Shards(1001));
    let layout = Sharding::new(1).unwrap();
    assert_eq!(layout.total_key("").unwrap_err(), ShardingError::EmptyName);
    let err = layout.shard_key(&"x".repeat(2040), 0).unwrap_err().to_string();
    assert!(err.contains("2048"), "{err}");
}

#[test]
fn each_region_writes_its_own_shards_and_the_exact_read_sums_them_all() {
    let alone = Sharding::new(4).unwrap();
    assert_eq!((alone.written(), alone.all()), (0..4, 0..4));
    let regions: Vec<Sharding> = (0..3).map(|r| Sharding::new(4).unwrap().in_region(r, 3).unwrap()).collect();
    let written: Vec<_> = regions.iter().map(Sharding::written).collect();
    assert_eq!(written, [0..4, 4..8, 8..12], "no shard written by two Regions");
    for layout in &regions {
        assert_eq!(layout.all(), 0..12, "every Region's reader sums every Region's shards");
        // The keys are the format's: a shard number, whatever the Region.
        let key = layout.shard_key("votes/alice", layout.written().start).unwrap();
        assert!(matches!(
            CounterKey::parse(&key),
            Some(CounterKey::Shard { shard, .. }) if shard == layout.written().start
        ));
    }
    for (region, count) in [(3, 3), (0, 0), (0, MAX_REGIONS + 1)] {
        let error = Sharding::new(4).unwrap().in_region(region, count).unwrap_err();
        assert_eq!(error, ShardingError::Region { region, regions: count });
    }
}

//! Tests of the indexer's own configuration: `MULTIKEY_ORDER`.

use stream_runtime::Vars;

use super::*;

#[test]
fn the_order_is_read_once_and_a_bad_one_names_the_variable() {
    let order = |value: Option<&str>| {
        let lookup = |name: &str| (name == ORDER_VAR).then(|| value.map(str::to_owned)).flatten();
        Order::from_vars(&Vars::new(&lookup)).map_err(|e| e.to_string())
    };
    assert_eq!(order(None), Ok(Order::Stream));
    assert_eq!(order(Some("stream")), Ok(Order::Stream));
    assert_eq!(order(Some("any")), Ok(Order::Any));
    let error = order(Some("Any")).unwrap_err();
    assert!(error.contains("MULTIKEY_ORDER") && error.contains("expected stream or any"), "{error}");
}

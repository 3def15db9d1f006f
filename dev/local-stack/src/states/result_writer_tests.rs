//! A Distributed `Map`'s `ResultWriter`, without S3: what it writes of a Map Run (its keys under
//! `<Prefix>/<map run id>/`, each succeeded child's record in `SUCCEEDED_0.json`, the
//! `manifest.json` that lists it) and the `Map`'s result, where they are; a failed child, which
//! writes nothing, named; and every `ResultWriter` the emulator would not write as Step Functions
//! does refused, naming what, before any child runs. The writes themselves are
//! tests/it/restore.rs's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};

use super::{Child, MapRun, ResultWriter, STATE_MACHINE, TaskInvoker, execute, export, unusable};
use crate::ACCOUNT;

/// A state machine of one `Map` in `mode` over `$.items` (each item a `Task`'s input, its output
/// the function's answer), with `writer` as its `ResultWriter`.
fn machine(mode: &str, writer: &Value) -> Value {
    json!({
        "StartAt": "Split",
        "States": {
            "Split": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": mode, "ExecutionType": "STANDARD"},
                    "StartAt": "Step",
                    "States": {
                        "Step": {
                            "Type": "Task",
                            "Resource": "arn:aws:states:::lambda:invoke",
                            "Parameters": {"FunctionName": "f", "Payload.$": "$"},
                            "OutputPath": "$.Payload",
                            "End": true
                        }
                    }
                },
                "ResultWriter": writer,
                "ResultPath": null,
                "End": true
            }
        }
    })
}

/// An invoker that answers its payload, each invocation counted in `calls`.
fn echo(calls: &Arc<AtomicU64>) -> TaskInvoker {
    let calls = Arc::clone(calls);
    Arc::new(move |_function: String, payload: Value| {
        calls.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move { Ok::<Value, (String, String)>(payload) })
    })
}

#[tokio::test]
async fn a_result_writer_it_does_not_write_as_step_functions_does_is_refused_before_a_child_runs() {
    let put = "arn:aws:states:::s3:putObject";
    let parameters = json!({"Bucket": "b", "Prefix": "map-runs"});
    let writer = |parameters: &Value| json!({"Resource": put, "Parameters": parameters});
    let mut configured = writer(&parameters);
    configured["WriterConfig"] = json!({"Transformation": "COMPACT", "OutputType": "JSONL"});
    let owner = json!({"Bucket": "b", "Prefix": "p", "ExpectedBucketOwner": "1"});
    let get = json!({"Resource": "arn:aws:states:::s3:getObject", "Parameters": parameters});
    let cases = [
        ("DISTRIBUTED", configured, "WriterConfig"),
        ("DISTRIBUTED", json!({"Resource": put, "Arguments": parameters}), "Arguments"),
        ("DISTRIBUTED", get, "s3:putObject"),
        ("DISTRIBUTED", writer(&owner), "ExpectedBucketOwner"),
        ("DISTRIBUTED", writer(&json!({"Bucket": "b"})), "no Prefix"),
        ("DISTRIBUTED", writer(&json!({"Prefix.$": "$.prefix"})), "no Bucket"),
        ("INLINE", writer(&parameters), "DISTRIBUTED Map only"),
        // As the template writes it, but run without S3.
        ("DISTRIBUTED", writer(&parameters), "execute_reading"),
    ];
    for (mode, writer, named) in cases {
        let calls = Arc::new(AtomicU64::new(0));
        let input = json!({"items": [1, 2], "prefix": "map-runs"});
        let error = execute(&machine(mode, &writer), input, &echo(&calls)).await.unwrap_err().to_string();
        assert!(error.contains("state Split") && error.contains(named), "{writer}: {error}");
        assert_eq!(calls.load(Ordering::Relaxed), 0, "{writer}: no child ran");
    }
}

/// A Map Run of the state `Split` (labelled so) in `eu-west-1`.
fn map_run() -> MapRun {
    MapRun::new("Split", &json!({"Label": "Split"}), "eu-west-1", &json!({"Execution": {"Name": "e"}}))
}

/// A child that ran from `at` (milliseconds since the epoch) for 5 ms on `input`, to `output`.
fn child(input: Value, output: Result<Value, crate::StackError>, at: u64) -> Child {
    let started = UNIX_EPOCH + Duration::from_millis(at);
    Child { input, output, started, stopped: started + Duration::from_millis(5) }
}

#[test]
fn a_map_run_writes_its_childrens_records_then_a_manifest_listing_them_and_answers_where() {
    let run = map_run();
    let (id, arn) = (run.id.clone(), run.arn.clone());
    assert_eq!(arn, format!("arn:aws:states:eu-west-1:{ACCOUNT}:mapRun:{STATE_MACHINE}/Split:{id}"));
    assert_ne!(map_run().id, id, "each Map Run has an id of its own");
    let batch = |key: &str| json!({"Items": [{"Key": key}], "BatchInput": {"n": 1}});
    let children = [
        child(batch("a"), Ok(json!({"objects": 1})), 1_700_000_000_123),
        child(batch("b"), Ok(json!({"objects": 0})), 1_700_000_000_124),
    ];
    // A Prefix ending in `/` writes under the same keys.
    for prefix in ["map-runs", "map-runs/"] {
        let writer = ResultWriter { bucket: "b".to_owned(), prefix: prefix.to_owned() };
        let (objects, result) = export("Split", &writer, &run, &children).unwrap();
        let (succeeded_key, manifest_key) =
            (format!("map-runs/{id}/SUCCEEDED_0.json"), format!("map-runs/{id}/manifest.json"));
        let keys: Vec<&str> = objects.iter().map(|(key, _)| key.as_str()).collect();
        assert_eq!(keys, [succeeded_key.as_str(), manifest_key.as_str()], "the results, then the manifest");
        let details = json!({"Bucket": "b", "Key": manifest_key});
        assert_eq!(result, json!({"MapRunArn": arn, "ResultWriterDetails": details}));

        let (_, body) = &objects[0];
        let manifest: Value = serde_json::from_slice(&objects[1].1).unwrap();
        let listed = json!([{"Key": succeeded_key, "Size": body.len()}]);
        assert_eq!(
            manifest,
            json!({
                "DestinationBucket": "b",
                "MapRunArn": arn,
                "ResultFiles": {"FAILED": [], "PENDING": [], "SUCCEEDED": listed},
            })
        );

        let records: Vec<Value> = serde_json::from_slice(body).unwrap();
        assert_eq!(records.len(), 2, "one record a child, in item order");
        let name = records[0]["Name"].as_str().unwrap().to_owned();
        assert_ne!(records[1]["Name"], name.as_str(), "each child execution has a name of its own");
        let children_arn = format!("arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:{STATE_MACHINE}/Split");
        let execution_arn =
            format!("arn:aws:states:eu-west-1:{ACCOUNT}:execution:{STATE_MACHINE}/Split:{name}");
        assert_eq!(
            records[0],
            json!({
                "ExecutionArn": execution_arn,
                "Input": children[0].input.to_string(),
                "InputDetails": {"Included": true},
                "Name": name,
                "Output": "{\"objects\":1}",
                "OutputDetails": {"Included": true},
                "RedriveCount": 0,
                "RedriveStatus": "NOT_REDRIVABLE",
                "RedriveStatusReason": "Execution is SUCCEEDED and cannot be redriven",
                "StartDate": "2023-11-14T22:13:20.123Z",
                "StateMachineArn": children_arn,
                "Status": "SUCCEEDED",
                "StopDate": "2023-11-14T22:13:20.128Z",
            })
        );
        let input: Value = serde_json::from_str(records[1]["Input"].as_str().unwrap()).unwrap();
        let output: Value = serde_json::from_str(records[1]["Output"].as_str().unwrap()).unwrap();
        assert_eq!((input, output), (batch("b"), json!({"objects": 0})), "JSON text, unchanged");
    }
}

#[test]
fn a_map_run_without_children_writes_only_its_manifest() {
    let run = map_run();
    let writer = ResultWriter { bucket: "b".to_owned(), prefix: "map-runs".to_owned() };
    let (objects, _) = export("Split", &writer, &run, &[]).unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0].0, format!("map-runs/{}/manifest.json", run.id));
    let manifest: Value = serde_json::from_slice(&objects[0].1).unwrap();
    assert_eq!(manifest["ResultFiles"], json!({"FAILED": [], "PENDING": [], "SUCCEEDED": []}));
}

#[test]
fn a_failed_child_fails_the_map_with_its_error_and_says_what_is_not_written() {
    let writer = ResultWriter { bucket: "b".to_owned(), prefix: "map-runs".to_owned() };
    let children = [
        child(json!({"n": 1}), Ok(json!({"objects": 1})), 0),
        child(json!({"n": 2}), Err(unusable("state Step: f failed: RestoreError: gone")), 0),
    ];
    let error = export("Split", &writer, &map_run(), &children).unwrap_err().to_string();
    assert!(error.starts_with("state Step: f failed: RestoreError: gone"), "{error}");
    assert!(error.contains("FAILED_0.json") && error.contains("not emulated"), "{error}");
}

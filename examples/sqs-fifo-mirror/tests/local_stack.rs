//! The mirror on Sidestream's local stack: a table's stream on moto, delivered as Lambda's event
//! source mapping delivers it (partial batch responses, retries from the checkpoint), the
//! function's SQS and S3 calls through the fault proxy, which throttles a third of them and
//! answers about a quarter with a 500 after applying them.
//!
//! Needs moto: `scripts/moto cargo test -- --include-ignored` from this folder (Sidestream's
//! `scripts/test` runs it so). A plain `cargo test` runs the plan's tests and skips this one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::QueueAttributeName;
use local_stack::fault_proxy::{self, Spec};
use local_stack::replayer::{FailureLog, Pipeline, Settings, Source};
use serde_json::Value;
use sqs_fifo_mirror::{MESSAGE_BYTES, Mirror};
use stream_runtime::delivery::{Invocation, Invoker, in_process};
use stream_runtime::io_policy::Deadline;
use stream_runtime::{Metric, Metrics, Runtime, Vars};

const ITEMS: usize = 30;
const VERSIONS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto: scripts/moto cargo test -- --include-ignored"]
async fn throttled_sends_checkpoint_a_refused_message_is_parked_and_each_change_arrives_once_in_order() {
    let endpoint = std::env::var("SIDESTREAM_MOTO_ENDPOINT")
        .expect("SIDESTREAM_MOTO_ENDPOINT is not set: run this test under Sidestream's scripts/moto");
    let moto = local_stack::emulator_sdk(&endpoint);
    let run = std::process::id();
    let (table, bucket, queue) =
        (format!("orders-{run}"), format!("parking-{run}"), format!("orders-{run}.fifo"));

    let (stream_arn, queue_url) = create(&moto, &table, &bucket, &queue).await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&moto);
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&moto).force_path_style(true).build(),
    );
    let sqs = aws_sdk_sqs::Client::new(&moto);

    let writes = write_changes(&dynamodb, &table).await;

    // The function, every call it makes through the fault proxy: one attempt per request, so a
    // throttled send fails its request and the batch checkpoints there; and about a quarter of the
    // requests are applied but answered with a 500, so that their messages are sent again.
    let spec = Spec::parse("throttle=0.3,apply-then-fail=0.25,seed=11").expect("a spec");
    let proxy = fault_proxy::start(&endpoint, spec).await.expect("the proxy starts");
    let through_proxy = local_stack::emulator_sdk(&format!("http://{}", proxy.addr));
    let env: HashMap<&str, String> = HashMap::from([
        ("MIRROR_QUEUE_URL", queue_url.clone()),
        ("PARKING_BUCKET", bucket.clone()),
        ("S3_FORCE_PATH_STYLE", "true".to_owned()),
        ("WRITE_MAX_ATTEMPTS", "1".to_owned()),
    ]);
    let lookup = move |name: &str| env.get(name).cloned();
    primes_its_queue(&moto, &Vars::new(&lookup), &queue).await;
    let runtime =
        Arc::new(Runtime::<Mirror>::from_vars(&Vars::new(&lookup), &through_proxy).expect("configured"));
    let metrics: Arc<Mutex<Vec<Metrics>>> = Arc::default();
    let (handler, kept) = (Arc::clone(&runtime), Arc::clone(&metrics));
    let invoker = in_process(move |event, deadline| {
        let (runtime, kept) = (Arc::clone(&handler), Arc::clone(&kept));
        async move {
            let (response, counted) = runtime.handle_counted(event, Deadline::at(deadline)).await;
            kept.lock().expect("not poisoned").push(counted);
            Invocation::answer(response)
        }
    });
    let source = mapping(stream_arn, invoker);
    let log = std::env::temp_dir().join(format!("mirror-failures-{run}.jsonl"));
    let mut pipeline = Pipeline::new(
        &aws_sdk_dynamodbstreams::Client::new(&moto),
        vec![source],
        Vec::new(),
        FailureLog::new(&log),
    );
    pipeline.settle().await.expect("the mapping catches up");

    // The mapping: every record delivered, none given up, and throttled sends retried from
    // their checkpoints.
    let counts = pipeline.counts()[0].1;
    assert_eq!(counts.delivered, writes as u64, "{counts:?}");
    assert_eq!(counts.given_up, 0, "{counts:?}");
    let total =
        |metric: Metric| metrics.lock().expect("not poisoned").iter().map(|m| m.get(metric)).sum::<u64>();
    let throttled = proxy.counts.throttled.load(std::sync::atomic::Ordering::Relaxed);
    let resent = proxy.counts.applied_then_failed.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "mirror: {writes} changes; {throttled} requests throttled, {resent} applied then failed; {} transient checkpoints, {} mapping retries",
        total(Metric::TransientFailures),
        counts.retries
    );
    assert!(throttled > 0, "the proxy throttled nothing");
    assert!(resent > 0, "no request was applied and then failed, so nothing was sent twice");
    assert!(total(Metric::TransientFailures) > 0, "no invocation checkpointed on a throttle");
    assert!(counts.retries >= total(Metric::TransientFailures), "{counts:?}");
    assert!(total(Metric::RecordsIn) >= writes as u64);
    // Its own metric, in its own namespace, on every invocation.
    assert!(total(MESSAGE_BYTES) > 0, "no message bytes counted");
    for counted in metrics.lock().expect("not poisoned").iter() {
        let emf: Value = serde_json::from_str(&counted.render(0)).expect("EMF");
        assert_eq!(emf["_aws"]["CloudWatchMetrics"][0]["Namespace"], "SqsFifoMirror", "{emf}");
        assert!(emf["MessageBytes"].is_u64(), "{emf}");
    }

    // The parked record: whole, in S3, with its cause.
    let parked = s3.list_objects_v2().bucket(&bucket).prefix("parked/").send().await.expect("listed");
    let keys: Vec<String> = parked.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(total(Metric::ParkedRecords), 2, "each refused message's record is parked once");
    for key in &keys {
        let body = s3.get_object().bucket(&bucket).key(key).send().await.expect("read").body.collect().await;
        let text = String::from_utf8(body.expect("a body").to_vec()).expect("UTF-8");
        assert!(text.contains("InvalidMessageContents") && text.contains("item-3"), "{text}");
    }

    // The queue: every other change once (those sent twice deduplicated by their eventID), each
    // item's in order.
    let (events, by_item) = drain(&sqs, &queue_url).await;
    assert_eq!(events.len(), writes - 2, "every change but the two refused, once");
    for (item, versions) in &by_item {
        let expected: Vec<u64> =
            (0..VERSIONS as u64).filter(|&v| !(item == "item-3" && (v == 2 || v == 3))).collect();
        assert_eq!(versions, &expected, "{item}'s changes in order");
    }
    let _ = std::fs::remove_file(&log);
}

/// At cold start the runtime checks the queue (the function's own resource) and the parking
/// bucket; a queue that takes smaller messages than `MIRROR_MAX_MESSAGE_BYTES` fails init, naming
/// the variable.
async fn primes_its_queue(moto: &SdkConfig, vars: &Vars<'_>, queue: &str) {
    let primed = Runtime::<Mirror>::from_vars(vars, moto).expect("configured").prime().await.expect("primed");
    assert_eq!(
        (primed.calls, primed.unchecked.len()),
        (2, 0),
        "GetQueueAttributes and HeadBucket: {primed:?}"
    );

    let small = aws_sdk_sqs::Client::new(moto)
        .create_queue()
        .queue_name(format!("small-{queue}"))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::MaximumMessageSize, "2048")
        .send()
        .await
        .expect("the queue is created");
    let url = small.queue_url().expect("a URL").to_owned();
    let lookup = |name: &str| match name {
        "MIRROR_QUEUE_URL" => Some(url.clone()),
        _ => vars.optional(name),
    };
    let error = Runtime::<Mirror>::from_vars(&Vars::new(&lookup), moto)
        .expect("configured")
        .prime()
        .await
        .expect_err("a queue of 2,048-byte messages fails init");
    let text = error.to_string();
    assert!(
        text.starts_with("MIRROR_QUEUE_URL: ")
            && text.contains("up to 2048 bytes, but MIRROR_MAX_MESSAGE_BYTES is 1048576"),
        "{text}"
    );
}

/// The source table with its stream, the parking bucket and the FIFO queue: the stream's ARN and
/// the queue's URL.
async fn create(moto: &SdkConfig, table: &str, bucket: &str, queue: &str) -> (String, String) {
    let dynamodb = aws_sdk_dynamodb::Client::new(moto);
    let source = local_stack::template::Table::keyed(table, "id", None, Some("NEW_AND_OLD_IMAGES"));
    let stream_arn = local_stack::replayer::resources::create_table(&dynamodb, &source)
        .await
        .expect("the table is created")
        .expect("a stream");
    let s3 =
        aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(moto).force_path_style(true).build());
    s3.create_bucket().bucket(bucket).send().await.expect("the bucket is created");
    let sqs = aws_sdk_sqs::Client::new(moto);
    let queue_url = sqs
        .create_queue()
        .queue_name(queue)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .send()
        .await
        .expect("the queue is created")
        .queue_url()
        .expect("a URL")
        .to_owned();

    (stream_arn, queue_url)
}

/// Each item inserted and changed `VERSIONS - 1` times. One change puts a character SQS refuses
/// into item-3: its record's message (the new image) and the next change's (the old image) are
/// refused. How many changes.
async fn write_changes(dynamodb: &aws_sdk_dynamodb::Client, table: &str) -> usize {
    let mut writes = 0;
    for version in 0..VERSIONS {
        for item in 0..ITEMS {
            let note = if item == 3 && version == 2 {
                "bad \u{ffff} note".to_owned()
            } else {
                format!("v{version}")
            };
            dynamodb
                .put_item()
                .table_name(table)
                .item("id", AttributeValue::S(format!("item-{item}")))
                .item("version", AttributeValue::N(version.to_string()))
                .item("note", AttributeValue::S(note))
                .send()
                .await
                .expect("the item is written");
            writes += 1;
        }
    }

    writes
}

/// Every message on the queue, each deleted once read: the events, and each item's versions in
/// the order they came. Fails on a message that comes twice.
async fn drain(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> (HashSet<String>, BTreeMap<String, Vec<u64>>) {
    let mut by_item: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut events = HashSet::new();
    loop {
        let got = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(60)
            .send()
            .await
            .expect("received");
        if got.messages().is_empty() {
            break;
        }
        for message in got.messages() {
            let body: Value = serde_json::from_str(message.body().unwrap_or_default()).expect("JSON");
            assert!(
                events.insert(body["eventID"].as_str().unwrap_or_default().to_owned()),
                "sent twice: {body}"
            );
            let item = body["keys"]["id"]["S"].as_str().unwrap_or_default().to_owned();
            let version =
                body["newImage"]["version"]["N"].as_str().and_then(|v| v.parse().ok()).expect("a version");
            by_item.entry(item).or_default().push(version);
            sqs.delete_message()
                .queue_url(queue_url)
                .receipt_handle(message.receipt_handle().unwrap_or_default())
                .send()
                .await
                .expect("deleted");
        }
    }
    (events, by_item)
}

/// The mirror's event source mapping on the orders table's stream: batches of 25, retried until
/// they succeed, failures reported per record.
fn mapping(stream_arn: String, invoker: Invoker) -> Source {
    Source {
        function: "sqs-fifo-mirror".into(),
        function_arn: "arn:aws:lambda:us-east-1:123456789012:function:orders-Mirror-1".into(),
        stream_arn,
        settings: Settings {
            batch_size: 25,
            maximum_retry_attempts: None,
            bisect: false,
            report_batch_item_failures: true,
            parallelization_factor: 1,
        },
        filters: Vec::new(),
        invoker,
        timeout: Duration::from_secs(30),
        mapping_uuid: "mirror-mapping".into(),
        kinesis: None,
        latest: false,
    }
}

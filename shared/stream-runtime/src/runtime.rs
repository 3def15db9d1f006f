//! The batch's life, the same for every function, and the Lambda entry point.

use crate::wire::{Batch, WireError, WireRecord};
use crate::{DynamoDbEventResponse, Event, Metric, Metrics, Vars};
use aws_config::BehaviorVersion;
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;
use io_policy::{Budget, Deadline, Failure, FailureKind};

use crate::conclude::{NoCheckpoint, conclude};

use crate::decide::{Decision, decide};
use crate::prime::{self, Bucket};
use crate::settings::{ParkingPlace, Settings};
use crate::{Aws, PrimeError, Primed, RecordFailure, StreamFunction, Whole, parked};

/// A function with its settings and clients, built once, handling batches.
#[derive(Debug)]
pub struct Runtime<F> {
    function: F,
    pub(crate) settings: Settings,
    aws: Aws,
}

impl<F: StreamFunction> Runtime<F> {
    /// Reads the runtime's settings and the function's configuration from `vars`, and builds
    /// the clients from `sdk` (the SDK's own retries are turned off).
    pub fn from_vars(vars: &Vars<'_>, sdk: &aws_types::SdkConfig) -> Result<Runtime<F>, crate::ConfigError> {
        let mut settings = Settings::from_vars(vars, F::NAME, F::NAMESPACE)?;
        settings.metrics = settings.metrics.declare(F::METRICS);
        let aws = Aws::new(sdk, settings.force_path_style);
        let function = F::init(vars, &aws)?;
        if settings.source == crate::Source::Kinesis
            && let Err(crate::AnyOrderHint(setting)) = function.any_order()
        {
            let remedy = setting.map_or_else(
                || "read the table's DynamoDB stream".to_owned(),
                |s| format!("set {s}, or read the table's DynamoDB stream"),
            );
            return Err(crate::ConfigError::Invalid {
                var: crate::source::SOURCE_VAR,
                reason: format!(
                    "kinesis: {} as configured needs each item's records in order, which a Kinesis data stream does not keep; {remedy}",
                    F::NAME
                ),
            });
        }
        Ok(Runtime::new(function, settings, &aws))
    }

    /// A runtime over a function already built.
    pub fn new(function: F, settings: Settings, aws: &Aws) -> Runtime<F> {
        Runtime { function, settings, aws: aws.clone() }
    }

    /// Checks the function's resources and opens their connections ([`crate::prime`]); an
    /// error means init must fail.
    pub async fn prime(&self) -> Result<Primed, PrimeError> {
        let mut resources = self.function.resources();
        // Parking is a write like any other: a missing or denied parking bucket is found at init.
        let parking = &self.settings.parking.bucket;
        if !resources.iter().any(|r| r.named().kind == "bucket" && r.named().name == parking) {
            resources.push(Box::new(Bucket { variable: "PARKING_BUCKET", name: parking.clone() }));
        }
        // A Kinesis data stream always carries both images; a DynamoDB stream, what its table says.
        if let (Some(table), crate::Source::DynamoDbStreams) =
            (&self.settings.source_table, self.settings.source)
        {
            resources.push(Box::new(prime::Source {
                variable: "SOURCE_TABLE",
                name: table.clone(),
                views: F::STREAM_VIEWS,
            }));
        }
        crate::prime::prime(&self.aws, &resources, self.settings.policy).await
    }

    /// Handles one batch: plan, apply, decide, park, conclude, and writes its metrics as one EMF
    /// line. Errs only when no checkpoint can be reported, so that Lambda retries the whole batch.
    pub async fn handle(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> Result<DynamoDbEventResponse, NoCheckpoint> {
        let (response, mut metrics) = self.handle_counted(event, deadline).await;
        metrics.flush();
        response
    }

    /// [`Runtime::handle`] without writing the metrics: they are returned beside the response.
    pub async fn handle_counted(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> (Result<DynamoDbEventResponse, NoCheckpoint>, Metrics) {
        let records = WireRecord::view_all(&event.records);
        self.handle_wire(&records, Whole::events(&event.records), deadline).await
    }

    /// [`Runtime::handle_counted`] of an event's JSON, read in place as under Lambda; an error
    /// when it is not a DynamoDB stream event.
    pub async fn handle_json(
        &self,
        json: &str,
        deadline: Deadline,
    ) -> Result<(Result<DynamoDbEventResponse, NoCheckpoint>, Metrics), WireError> {
        let batch = Batch::parse(json)?;
        Ok(self.handle_wire(&batch.records, Whole::text(json), deadline).await)
    }

    /// Handles one batch read in place: `records` for the plan and the response, `whole` for
    /// the records it parks. The metrics are returned beside the response, not written.
    pub async fn handle_wire(
        &self,
        records: &[WireRecord<'_>],
        whole: Whole<'_>,
        deadline: Deadline,
    ) -> (Result<DynamoDbEventResponse, NoCheckpoint>, Metrics) {
        let mut metrics = self.settings.metrics.for_batch(records.len());
        let budget = self.settings.policy.budget(deadline);

        let applied = Box::pin(self.function.plan_and_apply(records, &budget)).await;
        metrics.add(Metric::Writes, applied.writes);
        metrics.add(Metric::FailedWrites, applied.failed_writes);
        for (metric, n) in applied.counts {
            metrics.add(metric, n);
        }

        let mut decision = decide(&applied.failures);
        Box::pin(self.park(records, whole, &mut decision, &budget)).await;
        metrics.add(Metric::ParkedRecords, decision.park.len() as u64);
        if let Some(checkpoint) = &decision.checkpoint {
            report_stop(records, checkpoint, &mut metrics);
        }
        metrics.add(Metric::Requests, budget.tally.requests());
        metrics.add(Metric::Retries, budget.tally.retries());
        let response = conclude(records, decision.checkpoint.map(|c| c.record), &mut metrics);
        (response, metrics)
    }

    /// Parks the decision's records in order; the first that cannot be parked becomes the
    /// checkpoint, and nothing after it is parked. Its failure keeps the kind of the `PutObject`
    /// answer: systemic for a missing or denied bucket (an operator must fix it: alarmed),
    /// transient otherwise (a retry parks it).
    async fn park(
        &self,
        records: &[WireRecord<'_>],
        whole: Whole<'_>,
        decision: &mut Decision,
        budget: &Budget,
    ) {
        if decision.park.is_empty() {
            return;
        }
        let ParkingPlace { bucket, prefix } = &self.settings.parking;
        let function = F::NAME;
        let s3 = self.aws.s3();
        let whole = whole.open();
        for RecordFailure { record, failure } in decision.park.clone() {
            let Some(raw) = records.get(record) else {
                continue;
            };
            let key = parked::key(prefix, function, raw);
            let body =
                Bytes::from(parked::body(function, raw, whole.json(record), &failure, chrono::Utc::now()));
            let put = budget
                .call(|| {
                    let put = s3
                        .put_object()
                        .bucket(bucket)
                        .key(&key)
                        .content_type("application/json")
                        .body(ByteStream::from(body.clone()))
                        .send();
                    async move { put.await.map(drop).map_err(|e| io_policy::classify("PutObject", &e)) }
                })
                .await;
            match put {
                Ok(()) => tracing::error!(
                    record,
                    event_id = %raw.event_id,
                    sequence_number = raw.sequence_number.as_deref().unwrap_or(""),
                    kind = %failure.kind,
                    error = %failure.message,
                    parked = %format!("s3://{bucket}/{key}"),
                    "parked a record that can never succeed; the batch goes on"
                ),
                Err(cause) => {
                    tracing::error!(record, error = %failure.message, %cause, "cannot park the record; it becomes the checkpoint");
                    let message =
                        format!("parking record {record} in s3://{bucket} failed: {}", cause.message);
                    let failure = if cause.kind == FailureKind::Systemic {
                        Failure::systemic(message)
                    } else {
                        Failure::transient(message)
                    };
                    decision.unparked(record, failure);
                    break;
                }
            }
        }
    }
}

/// Logs the failure a batch stopped at, by kind, and counts it.
fn report_stop(records: &[WireRecord<'_>], stop: &RecordFailure, metrics: &mut Metrics) {
    let raw = records.get(stop.record);
    let event_id = raw.map_or("", |r| r.event_id.as_ref());
    let (record, error) = (stop.record, &stop.failure.message);
    match stop.failure.kind {
        FailureKind::Systemic => {
            metrics.add(Metric::SystemicFailures, 1);
            tracing::error!(record, event_id, kind = "systemic", %error, "systemic failure: every retry will fail alike until the cause is fixed");
        }
        // A checkpoint is never record-permanent: `decide` parks those instead.
        FailureKind::Transient | FailureKind::RecordPermanent => {
            metrics.add(Metric::TransientFailures, 1);
            tracing::warn!(record, event_id, kind = "transient", %error, "transient failure: Lambda retries from the checkpoint");
        }
    }
}

/// A function binary's `main`: [`run`], and an error (a cold start's) printed as one line and
/// exit status 1 ([`crate::exit::report`]). A function's `main` is this one call.
pub async fn main<F: StreamFunction>() -> std::process::ExitCode {
    crate::exit::report(F::NAME, run::<F>().await)
}

/// Runs the function `F` under Lambda: logging, configuration and clients once at cold start,
/// then every batch through [`Runtime::handle`].
pub async fn run<F: StreamFunction>() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    // Every missing variable is named at once.
    let runtime = Vars::new(&Vars::process_lookup).build(|vars| Runtime::<F>::from_vars(vars, &sdk))?;
    let source = runtime.settings.source;
    if runtime.settings.prime {
        runtime.prime().await?;
    }
    crate::source::serve(source, &runtime).await
}

impl<F: StreamFunction> crate::source::Handler for Runtime<F> {
    async fn handle_batch<'r>(
        &'r self,
        batch: crate::source::Delivered<'r>,
    ) -> Result<DynamoDbEventResponse, NoCheckpoint> {
        let (response, mut metrics) = self.handle_wire(batch.records, batch.whole, batch.deadline).await;
        metrics.flush();
        response
    }
}

//! `sidestream status` over the local stack: the stack's [`Target`] (what its outputs would give
//! an operator), the emulator's CloudWatch brought up to now first (the feed flushed, the queues'
//! depth published, the alarms evaluated), and the scheduled verifier run in process with its
//! EMF line fed, as on Lambda.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_config::SdkConfig;
use operations::status::{Clients, Status, Target};

use crate::cloudwatch::{self, Feed};
use crate::{Stack, StackError, s3_client};

/// The window `sidestream status` reads by default, in minutes.
const WINDOW_MINUTES: u64 = 15;

impl Stack {
    /// What `sidestream status` is given for this stack: its name, its metrics namespace, its
    /// parking bucket (its on-failure destination too), an on-failure queue if it has one, and
    /// its archive.
    pub(crate) fn status_target(&self) -> Target {
        let env = self
            .functions
            .iter()
            .find(|f| !f.streams.is_empty())
            .map(|f| f.environment.clone())
            .unwrap_or_default();
        Target {
            stack: self.name.clone(),
            namespace: env
                .get("METRICS_NAMESPACE")
                .cloned()
                .unwrap_or_else(|| formats::METRICS_NAMESPACE.to_owned()),
            queue_url: match self.failure_destination() {
                Some(crate::Destination::Queue(url)) => Some(url),
                _ => None,
            },
            parking_bucket: env.get("PARKING_BUCKET").cloned(),
            archive: self.archive_location().ok(),
            window: Duration::from_secs(WINDOW_MINUTES * 60),
            verify_window: Duration::from_secs(48 * 3600),
            // The template's IteratorAgeAlarmMilliseconds by default, and the CLI's --max-lag.
            max_lag: Duration::from_secs(300),
        }
    }

    /// The `sidestream status` command line that reads this stack: its name (the parking bucket
    /// and the archive come from its outputs, registered with the emulator), and what else its
    /// target differs in.
    pub fn status_command(&self) -> Result<String, StackError> {
        let target = self.status_target();
        let mut words = vec!["sidestream status --stack".to_owned(), target.stack.clone()];
        if target.namespace != formats::METRICS_NAMESPACE {
            words.extend(["--namespace".to_owned(), target.namespace.clone()]);
        }
        if let Some(url) = &target.queue_url {
            words.extend(["--queue".to_owned(), url.clone()]);
        }
        let command = words.join(" ");
        Ok(command)
    }
}

/// The stack's status as `sidestream status` reads it, once the emulator's CloudWatch holds
/// everything fed so far, the buckets' object counts and the alarms' states.
pub async fn status(sdk: &SdkConfig, stack: &Stack, feed: &Feed) -> Result<Status, StackError> {
    feed.bucket_sizes(sdk, stack).await?;
    feed.flush().await?;
    cloudwatch::evaluate_alarms(sdk, stack).await?;
    let clients = Clients {
        cloudwatch: aws_sdk_cloudwatch::Client::new(sdk),
        s3: s3_client(sdk),
        sqs: aws_sdk_sqs::Client::new(sdk),
    };
    operations::status::read(&clients, &stack.status_target(), SystemTime::now())
        .await
        .map_err(|e| StackError::Unusable(e.to_string()))
}

/// Runs the verify job once in process (`VerifyStateMachine`, which the template creates when
/// `IndexVerifySchedule` is set, with the verifier function's steps configured from its template
/// environment and `overrides` on top), and feeds the confirmation's EMF line to `feed`, as
/// Lambda would.
pub async fn verify(
    sdk: &SdkConfig,
    stack: &Stack,
    feed: &Feed,
    overrides: &[(&str, &str)],
) -> Result<operations::verify::scheduled::Run, StackError> {
    let invocations = Arc::new(AtomicU64::new(0));
    let job = verify_job(sdk, stack, overrides, Duration::from_secs(900), &invocations).await?;
    feed.emf(&job.emf.to_string());
    Ok(job.run)
}

/// Runs the verify job once in process, each invocation of the verifier given `timeout` before
/// its deadline and counted in `invocations`: the confirmation's run and EMF line, and the
/// execution's state transitions.
pub async fn verify_job(
    sdk: &SdkConfig,
    stack: &Stack,
    overrides: &[(&str, &str)],
    timeout: Duration,
    invocations: &Arc<AtomicU64>,
) -> Result<crate::VerifyJob, StackError> {
    let function = stack.function("index-verifier")?;
    let confirmed = Arc::new(Mutex::new(Vec::new()));
    let invoke = crate::verifier_invoker(
        function,
        sdk,
        overrides,
        timeout,
        Arc::clone(invocations),
        Arc::clone(&confirmed),
    )
    .await?;
    let invoke = stack.state_machine_invoker(sdk, "VerifyStateMachine", invoke)?;
    let execution =
        crate::states::execute(stack.state_machine("VerifyStateMachine")?, serde_json::json!({}), &invoke)
            .await?;
    let mut confirmed = confirmed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match confirmed.len() {
        1 => {
            let (run, emf) = confirmed.remove(0);
            Ok(crate::VerifyJob { run, emf, transitions: execution.transitions })
        }
        n => Err(StackError::Unusable(format!("the verify job confirmed {n} times, not once"))),
    }
}

//! `sidestream status`: the flags resolved into a `operations::status::Target`, the status read, and
//! printed as one screen or one JSON object; exit status 1 when something needs an operator, 2
//! when no function of the stack has reported (its health cannot be seen).

use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use operations::status::{Clients, Target};
use stream_runtime::Vars;

use crate::args::{Output, StatusArgs};

/// The exit status when the stack's health cannot be seen: no function of it has reported.
const UNSEEN: u8 = 2;

pub(crate) fn run(args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let status = crate::runtime()?.block_on(async {
        let sdk = crate::sdk().await?;
        // What the flags leave out, the stack's outputs and its archiver's configuration give.
        // A stack CloudFormation cannot describe is read without them: what its functions
        // reported still shows, and none reporting says the name may be wrong.
        let stack = if args.parking.is_none() || args.archive.is_none() {
            match crate::stack::read(&sdk, &args.stack).await {
                Ok(stack) => Some(stack),
                Err(e) => {
                    eprintln!("sidestream: {e:#}; reading the status without its parking bucket and archive");
                    None
                }
            }
        } else {
            None
        };
        let parking_bucket = args
            .parking
            .clone()
            .or_else(|| stack.as_ref().and_then(|s| s.output("ParkingBucket")).map(str::to_owned));
        let archive = args.archive.clone().map(|place| (place.bucket, place.prefix)).or_else(|| {
            let stack = stack.as_ref()?;
            let prefix = stack.environment_of("ttl-archiver").and_then(|env| env.get("ARCHIVE_PREFIX"));
            Some((
                stack.output("ArchiveBucket")?.to_owned(),
                prefix.cloned().unwrap_or_else(|| "archive/".into()),
            ))
        });
        let target = Target {
            stack: args.stack.clone(),
            namespace: args.namespace.clone(),
            queue_url: args.queue.clone(),
            parking_bucket,
            archive,
            window: Duration::from_secs(args.window * 60),
            verify_window: Duration::from_secs(args.verify_window * 3600),
            max_lag: Duration::from_secs(args.max_lag),
        };
        let clients = Clients {
            cloudwatch: aws_sdk_cloudwatch::Client::new(&sdk),
            s3: stream_runtime::aws::s3_client(&sdk, &Vars::new(&Vars::process_lookup))?,
            sqs: aws_sdk_sqs::Client::new(&sdk),
        };
        anyhow::Ok(operations::status::read(&clients, &target, SystemTime::now()).await?)
    })?;
    let mut out = std::io::stdout().lock();
    match args.output {
        Output::Json => writeln!(out, "{}", serde_json::to_string(&status)?)?,
        Output::Text => writeln!(out, "{status}")?,
    }
    if let Some(unseen) = &status.unseen {
        eprintln!("sidestream: {unseen}");
        return Ok(ExitCode::from(UNSEEN));
    }
    Ok(if status.needs_operator() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

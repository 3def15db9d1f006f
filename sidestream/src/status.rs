//! `sidestream status`: the flags resolved into a `operations::status::Target`, the status read, and
//! printed as one screen or one JSON object; exit status 1 when something needs an operator.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use operations::status::{Clients, Target};
use stream_runtime::Vars;

use crate::args::{Output, StatusArgs};
use crate::failures::s3_url;

pub(crate) fn run(args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let archive = args
        .archive
        .as_deref()
        .map(|url| s3_url("--archive", url).map(|(bucket, prefix)| (bucket.to_owned(), prefix.to_owned())))
        .transpose()?;
    let target = Target {
        stack: args.stack.clone(),
        namespace: args.namespace.clone(),
        queue_url: args.queue.clone(),
        parking_bucket: args.parking.clone(),
        archive,
        window: Duration::from_secs(args.window * 60),
        verify_window: Duration::from_secs(args.verify_window * 3600),
        max_lag: Duration::from_secs(args.max_lag),
    };
    let status = crate::runtime()?.block_on(async {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
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
    Ok(if status.needs_operator() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

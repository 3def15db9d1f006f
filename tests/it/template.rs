//! `template.yaml` against the code: the checks cfn-lint does not make, every function's
//! environment parsed by that function's own configuration code, and each role's permissions
//! limited to the tables, stream, bucket prefix, queue and log group the function uses.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use local_stack::template::{Function, Names, Resolver, Template, check};
use serde_json::Value;
use stream_runtime::Vars;

use crate::support::template::{
    ACCOUNT, COMBINED, COUNTER_STREAM, ISSUES_STREAM, REGION, VERIFIER, alarm_metrics, deployments,
    kinesis_deployments, names, physical, set, stream_functions, template,
};

const BACKFILLER: &str = "index-backfiller";

/// The restore job's function (only when `EnableArchiveRestore` is "true").
const RESTORER: &str = "archive-restorer";

/// The grid API's function (only when `GridApi` is "true").
const GRID_API: &str = "grid-api";

#[test]
fn template_passes_the_checks_cfn_lint_does_not_make() -> Result<()> {
    let template = template()?;
    for (deployment, parameters) in deployments() {
        let functions = template.functions(&template.resolver(&parameters, names()))?;
        let problems: Vec<String> = check(&functions).iter().map(ToString::to_string).collect();
        ensure!(problems.is_empty(), "{deployment}: {problems:#?}");
        let binaries: BTreeSet<_> = functions.iter().filter_map(|f| f.binary.as_deref()).collect();
        let mut expected: BTreeSet<&str> = stream_functions().into_iter().collect();
        // On a global table, the archiver and the aggregator run only in their Region.
        let elsewhere = |name: &str| parameters.get(name).is_some_and(|r| !r.is_empty() && r != REGION);
        if elsewhere("ArchiveRegion") {
            expected.remove("ttl-archiver");
        }
        if elsewhere("AggregatorRegion") {
            expected.remove("counter-aggregator");
        }
        if parameters.get("Consumers").is_some_and(|v| v == "Combined") {
            expected.retain(|b| *b == "counter-aggregator");
            expected.insert(COMBINED);
        }
        if parameters.get("EnableBackfill").is_some_and(|v| v == "true") {
            expected.insert(BACKFILLER);
        }
        if parameters.get("IndexVerifySchedule").is_some_and(|v| !v.is_empty()) {
            expected.insert(VERIFIER);
        }
        if parameters.get("EnableArchiveRestore").is_some_and(|v| v == "true") && !elsewhere("ArchiveRegion")
        {
            expected.insert(RESTORER);
        }
        if parameters.get("GridApi").is_some_and(|v| v == "true") {
            expected.insert(GRID_API);
        }
        ensure!(binaries == expected, "{deployment}: the template's functions run {binaries:?}");
        for f in &functions {
            ensure!(
                f.architectures == ["arm64"] && f.log_format.as_deref() == Some("JSON"),
                "{}: arm64, JSON logs",
                f.logical_id
            );
            if matches!(f.binary.as_deref(), Some(BACKFILLER | VERIFIER | RESTORER)) {
                ensure!(
                    f.streams.is_empty() && f.timeout == Some(900),
                    "{}: no stream, 15 minutes",
                    f.logical_id
                );
                continue;
            }
            if f.binary.as_deref() == Some(GRID_API) {
                // A page stops at 20 s; the function answers within its 30.
                ensure!(f.streams.is_empty() && f.timeout == Some(30), "{}: no stream, 30 s", f.logical_id);
                continue;
            }
            ensure!(f.streams.len() == 1, "{}: one stream source", f.logical_id);
            let s = &f.streams[0];
            ensure!(
                s.bisect == Some(true) && s.on_failure.is_some(),
                "{}: bisects and has a failure destination",
                f.logical_id
            );
            ensure!(
                s.maximum_retry_attempts.is_some() && s.maximum_record_age.is_some(),
                "{}: bounded retries",
                f.logical_id
            );
        }
    }
    Ok(())
}

/// Every variable the template sets is read by the function's configuration code, and that code
/// accepts the values: a misspelt name or a value the function would reject at cold start fails.
#[test]
fn every_functions_environment_is_what_its_config_reads() -> Result<()> {
    let template = template()?;
    for (deployment, parameters) in deployments() {
        let resolver = template.resolver(&parameters, names());
        for function in template.functions(&resolver)? {
            let binary = function.binary.clone().unwrap_or_default();
            let read = RefCell::new(BTreeSet::new());
            let lookup = |name: &str| {
                read.borrow_mut().insert(name.to_owned());
                function.environment.get(name).cloned()
            };
            let vars = Vars::new(&lookup);
            let used = uses(&binary, &vars, &function, &resolver)
                .with_context(|| format!("{deployment}: {} ({binary})", function.logical_id))?;
            let unread: Vec<_> =
                function.environment.keys().filter(|k| !read.borrow().contains(*k)).collect();
            ensure!(unread.is_empty(), "{deployment}: {binary} never reads {unread:?}");
            check_role(template, &resolver, &function, &used)
                .with_context(|| format!("{deployment}: {binary}'s role"))?;
        }
    }
    Ok(())
}

/// A function that puts tombstones is told how long its mapping may hold a record back
/// (`MULTIKEY_MAX_RECORD_AGE_SECONDS`): its own mapping's `MaximumRecordAgeInSeconds`, in every
/// deployment, the indexer's and the archiver's set apart so that a mix-up shows.
#[test]
fn a_tombstones_lifetime_is_its_own_mappings_record_age() -> Result<()> {
    let template = template()?;
    let mut checked = 0;
    for (deployment, mut parameters) in deployments() {
        parameters.insert("MaximumRecordAgeInSeconds".into(), "7200".into());
        parameters.insert("ArchiverMaximumRecordAgeInSeconds".into(), "3600".into());
        let resolver = template.resolver(&parameters, names());
        for function in template.functions(&resolver)? {
            let Some(age) = function.environment.get("MULTIKEY_MAX_RECORD_AGE_SECONDS") else { continue };
            let mapping = function.streams.first().and_then(|s| s.maximum_record_age);
            ensure!(
                mapping.map(|m| m.to_string()).as_deref() == Some(age.as_str()),
                "{deployment}: {} is told {age} s, its mapping gives records up after {mapping:?}",
                function.logical_id
            );
            checked += 1;
        }
    }
    // Each deployment has an indexer, separate or combined.
    ensure!(checked >= deployments().len(), "only {checked} functions checked");
    Ok(())
}

/// What a function touches, from its parsed configuration.
#[derive(Default)]
struct Uses {
    tables: BTreeSet<String>,
    /// `bucket/prefix` it writes under.
    objects: Vec<String>,
    /// `bucket/prefix` it only reads under (the restorer: the archive).
    reads: Vec<String>,
    /// Indexes of its tables it queries (`table/<table>/index/<index>`: the grid API's nulls
    /// index).
    table_indexes: BTreeSet<String>,
    /// The secret it reads (the grid API's cursor key).
    secret: Option<String>,
    /// `bucket/prefix` it parks records under.
    parked: Vec<String>,
    /// Whether it writes to the index (the verifier, when configured to repair).
    repairs: bool,
}

/// Whether a mapping reads a Kinesis data stream.
fn from_kinesis(function: &Function) -> bool {
    function.streams.first().is_some_and(|s| s.stream.contains(":kinesis:"))
}

/// The change-record patterns of a mapping's filters: on Kinesis each one matches the record's
/// `data` (`{"data": <pattern>}`), and must be exactly that.
fn change_patterns(function: &Function) -> Result<Vec<String>> {
    let filters = function.streams.first().map(|s| s.filters.clone()).unwrap_or_default();
    if !from_kinesis(function) {
        return Ok(filters);
    }
    filters
        .iter()
        .map(|f| {
            let pattern: Value = serde_json::from_str(f)?;
            match pattern.as_object() {
                Some(o) if o.len() == 1 && o["data"].is_object() => Ok(o["data"].to_string()),
                _ => bail!("a Kinesis mapping's filter matches the change record in data: {f}"),
            }
        })
        .collect()
}

fn uses(binary: &str, vars: &Vars<'_>, function: &Function, resolver: &Resolver<'_>) -> Result<Uses> {
    if binary == COMBINED {
        return combined_uses(vars, function, resolver);
    }
    let filters = change_patterns(function)?;
    function_uses(binary, vars, function, resolver, &filters)
}

/// The combined function: its configuration builds as the binary builds it, it touches what its
/// functions touch, and its mapping's filter is the union of theirs, or none when one of them
/// takes every record.
fn combined_uses(vars: &Vars<'_>, function: &Function, resolver: &Resolver<'_>) -> Result<Uses> {
    // Built as the binary builds it at cold start; building makes no request.
    let sdk = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .build();
    sidestream_combined::combined(vars, &sdk)?;
    let names = vars.required(sidestream_combined::COMBINED_FUNCTIONS, "")?;
    let own: Value =
        serde_json::from_str(&vars.optional(stream_runtime::combined::FILTERS_VAR).unwrap_or_default())?;
    let mut total = Uses::default();
    let mut union = BTreeSet::new();
    let mut takes_every_record = false;
    for name in names.split(',').map(str::trim) {
        let patterns: Vec<String> =
            own[name].as_array().into_iter().flatten().map(Value::to_string).collect();
        takes_every_record |= patterns.is_empty();
        let member = function_uses(name, vars, function, resolver, &patterns)
            .with_context(|| format!("{COMBINED}'s {name}"))?;
        total.tables.extend(member.tables);
        total.objects.extend(member.objects);
        total.parked.extend(member.parked);
        for p in patterns {
            union.insert(serde_json::from_str::<Value>(&p)?.to_string());
        }
    }
    let mapping: BTreeSet<String> = change_patterns(function)?
        .iter()
        .map(|f| serde_json::from_str::<Value>(f).map(|v| v.to_string()))
        .collect::<Result<_, _>>()?;
    let expected = if takes_every_record { BTreeSet::new() } else { union };
    ensure!(
        mapping == expected,
        "the mapping's filters {mapping:?} are not the union of the functions' {expected:?}"
    );
    Ok(total)
}

/// What the function `binary` touches, with `filters` its own stream filter patterns.
fn function_uses(
    binary: &str,
    vars: &Vars<'_>,
    function: &Function,
    resolver: &Resolver<'_>,
    filters: &[String],
) -> Result<Uses> {
    let parameter = |name: &str| resolver.parameter(name).unwrap_or_default().to_owned();
    let mut uses = Uses::default();
    if binary == BACKFILLER {
        return backfiller_uses(vars, &parameter);
    }
    if binary == VERIFIER {
        return verifier_uses(vars, &parameter);
    }
    if binary == RESTORER {
        return restorer_uses(vars, &parameter);
    }
    if binary == GRID_API {
        return grid_api_uses(vars, &parameter, resolver);
    }
    let settings = stream_runtime::Settings::from_vars(vars, binary, formats::METRICS_NAMESPACE)?;
    ensure!(
        (settings.source == stream_runtime::Source::Kinesis) == from_kinesis(function),
        "reads {:?} but its mapping's stream is {:?}",
        settings.source,
        function.streams.first().map(|s| &s.stream)
    );
    // Priming checks the view type of exactly the table whose DynamoDB stream it reads.
    let stream = function.streams.first().map(|s| s.stream.as_str()).unwrap_or_default();
    let source = stream.split_once("/stream/").and_then(|(table, _)| table.rsplit('/').next());
    ensure!(
        settings.source_table.as_deref() == source.filter(|_| !from_kinesis(function)),
        "SOURCE_TABLE {:?}, but its mapping reads {stream}",
        settings.source_table
    );
    ensure!(
        settings.parking.bucket == physical("ParkingBucket"),
        "parks records in {} not the ParkingBucket",
        settings.parking.bucket
    );
    uses.parked.push(format!("{}/{}{binary}/", settings.parking.bucket, settings.parking.prefix));
    match binary {
        "multikey-indexer" => indexer_uses(vars, function, &parameter, filters, &mut uses)?,
        "ttl-archiver" => {
            let config = ttl_archiver::Config::from_vars(vars)?;
            let expected = match parameter("ArchiveBucketName") {
                name if name.is_empty() => physical("ArchiveBucket"),
                name => name,
            };
            ensure!(
                config.archive.bucket == expected,
                "archives to {} not {expected}",
                config.archive.bucket
            );
            ensure!(config.layout.prefix == parameter("ArchivePrefix"), "prefix {}", config.layout.prefix);
            uses.objects.push(format!("{}/{}", config.archive.bucket, config.layout.prefix));
        }
        "counter-aggregator" => {
            let table = counter_aggregator::config::Config::from_vars(vars)?.table;
            let stream = &function.streams[0].stream;
            let counter_changes =
                format!("arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{}", physical("CounterChangeStream"));
            ensure!(
                stream.contains(&format!(":table/{table}/stream/")) || *stream == counter_changes,
                "totals go to {table} but the stream is {stream}: totals belong in the counter table",
            );
            uses.tables.insert(table);
        }
        other => bail!("no configuration known for binary {other:?}"),
    }
    Ok(uses)
}

/// What the indexer touches: its index table, in any order exactly when from Kinesis.
fn indexer_uses(
    vars: &Vars<'_>,
    function: &Function,
    parameter: &dyn Fn(&str) -> String,
    filters: &[String],
    uses: &mut Uses,
) -> Result<()> {
    let order = multikey_indexer::config::Order::from_vars(vars)?;
    ensure!(
        (order == multikey_indexer::handler::Order::Any) == from_kinesis(function),
        "indexes {order:?} from {:?}: in any order exactly when from Kinesis",
        function.streams.first().map(|s| &s.stream)
    );
    let indexes = multikey_indexer::Indexes::from_vars(vars)?;
    let [index] = indexes.indexes.as_slice() else { bail!("one index expected") };
    let expected = match parameter("IndexTableName") {
        // The stack names it `<stack>-index`.
        name if name.is_empty() => "sidestream-index".to_owned(),
        name => name,
    };
    ensure!(*index.table == *expected, "indexes {} but the index table is {expected}", index.table);
    ensure!(index.source == parameter("IndexedAttribute"), "indexes {} not IndexedAttribute", index.source);
    if matches!(parameter("IndexedAttributeType").as_str(), "SS" | "NS") {
        ensure!(
            filters.len() == 2 && filters.iter().all(|f| f.contains(&format!("\"{}\"", index.source))),
            "{filters:?}"
        );
    } else {
        ensure!(filters.is_empty(), "a map or list source cannot be filtered: {filters:?}");
    }
    uses.tables.insert(index.table.to_string());
    Ok(())
}

/// What the scheduled verifier reads (both tables) and, when repairing, writes (the index).
fn verifier_uses(vars: &Vars<'_>, parameter: &dyn Fn(&str) -> String) -> Result<Uses> {
    let mut uses = Uses::default();
    let config = operations::verify::scheduled::Config::from_vars(vars)?;
    let issues = issues_table(parameter);
    let index_table = match parameter("IndexTableName") {
        // The stack names it `<stack>-index`.
        name if name.is_empty() => "sidestream-index".to_owned(),
        name => name,
    };
    ensure!(
        config.table == issues && *config.index.table == *index_table,
        "verifies {} against {}, not {index_table} against {issues}",
        config.index.table,
        config.table
    );
    ensure!(config.repair == (parameter("IndexVerifyRepair") == "true"), "repairs: {}", config.repair);
    let results = operations::verify::job::Results::from_vars(vars)?;
    uses.tables.extend([issues, index_table]);
    uses.objects.push(format!("{}/{}", results.bucket, results.prefix));
    uses.repairs = config.repair;
    Ok(uses)
}

/// What the grid API reads: the index table, the issues table and its nulls index, and its
/// secret.
fn grid_api_uses(
    vars: &Vars<'_>,
    parameter: &dyn Fn(&str) -> String,
    resolver: &Resolver<'_>,
) -> Result<Uses> {
    let mut uses = Uses::default();
    let config = operations::grid_api::Config::from_vars(vars)?;
    let issues = issues_table(parameter);
    ensure!(config.table == issues, "pages {}, not the issues table {issues}", config.table);
    let index = operations::grid::GridSchema::new(&config.indexes, None, &config.table, &config.nulls_index)?;
    let secret =
        resolver.string(&serde_json::json!({"Ref": "GridApiCursorSecret"}), "GridApiCursorSecret")?;
    ensure!(config.secret == secret, "reads the cursor key from {}, not the stack's secret", config.secret);
    uses.tables.extend([issues.clone(), index.index_table().to_owned()]);
    uses.table_indexes
        .insert(format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{issues}/index/{}", config.nulls_index));
    uses.secret = Some(secret);
    Ok(uses)
}

/// What the restore job's function touches: it reads the archive, keeps its state in its own
/// bucket, and puts items into the issues table, paced and bounded as the parameters say.
fn restorer_uses(vars: &Vars<'_>, parameter: &dyn Fn(&str) -> String) -> Result<Uses> {
    let mut uses = Uses::default();
    let config = operations::archive::job::Config::from_vars(vars)?;
    let issues = issues_table(parameter);
    let archive = match parameter("ArchiveBucketName") {
        name if name.is_empty() => physical("ArchiveBucket"),
        name => name,
    };
    ensure!(config.table == issues, "restores into {}, not the issues table {issues}", config.table);
    ensure!(config.archive_bucket == archive, "reads {}, not the archive {archive}", config.archive_bucket);
    ensure!(config.ttl_attribute == parameter("TtlAttribute"), "TTL attribute {}", config.ttl_attribute);
    ensure!(config.bucket == physical("RestoreBucket"), "keeps its state in {}", config.bucket);
    let units = parameter("RestoreWriteUnitsPerPartition");
    ensure!(config.write_units == units.parse().ok(), "paces at {:?}, not {units:?}", config.write_units);
    ensure!(config.reserved.to_string() == parameter("RestoreConcurrency"), "bounded at {}", config.reserved);
    uses.tables.insert(issues);
    uses.objects.push(format!("{}/{}", config.bucket, config.prefix));
    uses.reads.push(format!("{archive}/{}", parameter("ArchivePrefix")));
    Ok(uses)
}

/// What the backfill function touches: the issues table, the items with the indexed attribute.
fn backfiller_uses(vars: &Vars<'_>, parameter: &dyn Fn(&str) -> String) -> Result<Uses> {
    let mut uses = Uses::default();
    let (target, settings) = operations::backfill::task::target_from_vars(vars)?;
    let expected = issues_table(parameter);
    ensure!(target.table == expected, "touches {} not the issues table {expected}", target.table);
    ensure!(
        target.sources == [parameter("IndexedAttribute")],
        "touches items with {:?}, not what the indexer indexes",
        target.sources
    );
    let units = parameter("BackfillWriteUnitsPerSegment");
    ensure!(
        settings.write_units_per_second == units.parse().ok(),
        "paces writes at {:?}, not BackfillWriteUnitsPerSegment {units:?}",
        settings.write_units_per_second
    );
    uses.tables.insert(target.table);
    Ok(uses)
}

/// Each statement of the function's role allows only what the function needs, on its own resources.
fn check_role(template: &Template, resolver: &Resolver<'_>, function: &Function, uses: &Uses) -> Result<()> {
    let resource = &template.root()["Resources"][&function.logical_id];
    let role = resource
        .pointer("/Properties/Role/Fn::GetAtt/0")
        .and_then(Value::as_str)
        .context("Role: !GetAtt <role>.Arn expected")?;
    let policies = role_policies(template, resolver, role)?;
    let log_group = resource
        .pointer("/Properties/LoggingConfig/LogGroup/Ref")
        .and_then(Value::as_str)
        .context("LoggingConfig.LogGroup: !Ref expected")?;
    let log_group_arn = format!("arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{}:*", physical(log_group));
    let table_arns: BTreeSet<String> =
        uses.tables.iter().map(|t| format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{t}")).collect();
    let (stream, destination) = function.streams.first().map_or((String::new(), String::new()), |s| {
        (s.stream.clone(), s.on_failure.clone().unwrap_or_default())
    });
    ensure!(
        function.streams.is_empty() || destination.starts_with("arn:aws:s3:::"),
        "ranges given up go to a bucket, which keeps their records: {destination:?}"
    );
    // A DynamoDB stream's table, whose view type priming checks.
    let source_table = stream.split_once("/stream/").map(|(table, _)| table);
    let mut granted = BTreeSet::new();
    for statement in statements(&policies) {
        ensure!(statement["Effect"] == "Allow", "{statement}");
        let actions = strings(&statement["Action"]);
        let resources = strings(&statement["Resource"]);
        for action in &actions {
            ensure!(!action.contains('*'), "wildcard action {action}");
            // Customer managed keys: checked apart (customer_managed_keys_are_used_through_their_service).
            if action.starts_with("kms:") {
                continue;
            }
            let allowed = |r: &String| match action.as_str() {
                "dynamodb:DescribeStream"
                | "dynamodb:GetRecords"
                | "dynamodb:GetShardIterator"
                | "kinesis:DescribeStream"
                | "kinesis:DescribeStreamSummary"
                | "kinesis:GetRecords"
                | "kinesis:GetShardIterator"
                | "kinesis:ListShards" => *r == stream,
                // Priming: the written tables' key schemas, and the source stream's view type.
                "dynamodb:DescribeTable" => table_arns.contains(r) || Some(r.as_str()) == source_table,
                // The grid API queries the issues table's nulls index too.
                "dynamodb:Query" => table_arns.contains(r) || uses.table_indexes.contains(r),
                // Actions the Service Authorization Reference gives no resource type: granted on
                // "*", since a statement naming an ARN grants nothing for them. The verifier's
                // read of the indexer's IteratorAge; the stream's listing, by Lambda's mapping.
                "cloudwatch:GetMetricStatistics" | "dynamodb:ListStreams" => *r == "*",
                a if a.starts_with("dynamodb:") => table_arns.contains(r),
                // The grid API's cursor key, its own secret only.
                "secretsmanager:GetSecretValue" => uses.secret.as_deref() == Some(r.as_str()),
                // Lambda writes what it gives up under aws/lambda/ in the destination bucket.
                "s3:PutObject" => {
                    uses.objects.iter().chain(&uses.parked).any(|o| *r == format!("arn:aws:s3:::{o}*"))
                        || *r == format!("{destination}/aws/lambda/*")
                }
                // The verify job reads back the state it wrote.
                // The restorer reads the archive.
                "s3:GetObject" => {
                    uses.objects.iter().chain(&uses.reads).any(|o| *r == format!("arn:aws:s3:::{o}*"))
                }
                // HeadBucket at init: the archive and the parking bucket themselves; Lambda
                // lists the destination.
                "s3:ListBucket" => {
                    uses.objects.iter().chain(&uses.parked).any(|o| {
                        o.split('/').next().is_some_and(|bucket| *r == format!("arn:aws:s3:::{bucket}"))
                    }) || *r == destination
                }
                "logs:CreateLogStream" | "logs:PutLogEvents" => *r == log_group_arn,
                _ => false,
            };
            for r in &resources {
                ensure!(allowed(r), "{action} on {r} is more than the function needs");
            }
            granted.insert(action.clone());
        }
    }
    let own = own_actions(function, uses);
    let logs = ["logs:CreateLogStream", "logs:PutLogEvents"];
    let stream_functions = [
        "s3:PutObject",
        // HeadBucket on the parking bucket at init.
        "s3:ListBucket",
    ];
    let reads = stream_reads(function);
    let common: &[&str] = if function.streams.is_empty() { &[] } else { &stream_functions };
    let needed: BTreeSet<String> =
        own.iter().chain(common).chain(reads).chain(&logs).map(|a| (*a).to_owned()).collect();
    ensure!(granted == needed, "grants {granted:?}, needs exactly {needed:?}");
    Ok(())
}

/// The actions reading a function's change source: its DynamoDB stream or its Kinesis stream.
fn stream_reads(function: &Function) -> &'static [&'static str] {
    match (function.streams.is_empty(), from_kinesis(function)) {
        (true, _) => &[],
        (false, false) => &[
            // Of the source table, at init: its stream's view type.
            "dynamodb:DescribeTable",
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
            "dynamodb:ListStreams",
        ],
        (false, true) => &[
            "kinesis:DescribeStream",
            "kinesis:DescribeStreamSummary",
            "kinesis:GetRecords",
            "kinesis:GetShardIterator",
            "kinesis:ListShards",
        ],
    }
}

/// The actions a function needs of its own, besides what every stream function and every
/// function needs.
fn own_actions(function: &Function, uses: &Uses) -> &'static [&'static str] {
    match function.binary.as_deref() {
        // DescribeTable and HeadBucket (s3:ListBucket): priming at init.
        // DescribeTable and HeadBucket (s3:ListBucket): priming at init; the combined function
        // needs the indexer's and the archiver's (which has none of its own).
        // Each entry and tombstone a guarded PutItem; records without a version in a
        // BatchWriteItem. Kept for the previous version, which runs under this role while a
        // deploy moves the alias: its transactions' ConditionCheckItem and DeleteItem, and
        // its heads' BatchGetItem on Kinesis (docs/deploying.md, "Upgrading").
        Some("multikey-indexer" | COMBINED) if from_kinesis(function) => &[
            "dynamodb:BatchGetItem",
            "dynamodb:BatchWriteItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:DeleteItem",
            "dynamodb:DescribeTable",
            "dynamodb:PutItem",
        ],
        Some("multikey-indexer" | COMBINED) => &[
            "dynamodb:BatchWriteItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:DeleteItem",
            "dynamodb:DescribeTable",
            "dynamodb:PutItem",
        ],
        // The archiver's own PutObject and ListBucket are in `common`, with parking's.
        Some("ttl-archiver") => &[],
        Some("counter-aggregator") => {
            &["dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]
        }
        Some(BACKFILLER) => &["dynamodb:Scan", "dynamodb:UpdateItem"],
        // A page: the index's entries (Query), the issues without one (Query on the nulls
        // index), the attributes asked for (BatchGetItem); the cursor key at cold start.
        Some(GRID_API) => &["dynamodb:Query", "dynamodb:BatchGetItem", "secretsmanager:GetSecretValue"],
        // The key schema, then whole items put (BatchWriteItem; PutItem with if_absent); the
        // archive read; the job's parts and cursors listed, read and written in its bucket.
        Some(RESTORER) => &[
            "dynamodb:DescribeTable",
            "dynamodb:BatchWriteItem",
            "dynamodb:PutItem",
            "s3:GetObject",
            "s3:PutObject",
            "s3:ListBucket",
        ],
        // A verification scans both tables and looks each page up in the other, and reads the
        // indexer's lag; a repair reads and touches base items, and deletes index entries.
        // The job keeps its segments' state and its results in its bucket, which it may list
        // (a missing key is then 404, not 403).
        Some(VERIFIER) if uses.repairs => &[
            "dynamodb:Scan",
            "dynamodb:BatchGetItem",
            "cloudwatch:GetMetricStatistics",
            "s3:GetObject",
            "s3:PutObject",
            "s3:ListBucket",
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        ],
        Some(VERIFIER) => &[
            "dynamodb:Scan",
            "dynamodb:BatchGetItem",
            "cloudwatch:GetMetricStatistics",
            "s3:GetObject",
            "s3:PutObject",
            "s3:ListBucket",
        ],
        _ => &[],
    }
}

/// Every statement of a role's `Policies`.
fn statements(policies: &Value) -> Vec<Value> {
    policies
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["PolicyDocument"]["Statement"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Each role the deployment creates, by logical id, with its policies' statements resolved.
fn role_statements<'t>(
    template: &'t Template,
    resolver: &Resolver<'t>,
) -> Result<Vec<(&'t str, Vec<Value>)>> {
    let mut roles = Vec::new();
    for role in resolver.existing("AWS::IAM::Role")? {
        roles.push((role, statements(&role_policies(template, resolver, role)?)));
    }
    Ok(roles)
}

/// A role's policies, resolved: its own (`Policies`), and the stack's managed policies it
/// attaches (`ManagedPolicyArns`), which several roles share.
fn role_policies(template: &Template, resolver: &Resolver<'_>, role: &str) -> Result<Value> {
    let resources = &template.root()["Resources"];
    let properties = &resources[role]["Properties"];
    let mut policies = resolver
        .resolve(&properties["Policies"], role)?
        .and_then(|p| p.as_array().cloned())
        .unwrap_or_default();
    // Resolved (conditions and all), `!Ref` of the stack's managed policy is its physical name.
    let attached = strings(&resolver.resolve(&properties["ManagedPolicyArns"], role)?.unwrap_or_default());
    for policy in template.resources_of_type("AWS::IAM::ManagedPolicy") {
        if attached.contains(&physical(policy)) {
            let document = resolver
                .resolve(&resources[policy]["Properties"]["PolicyDocument"], policy)?
                .unwrap_or_default();
            policies.push(serde_json::json!({"PolicyName": policy, "PolicyDocument": document}));
        }
    }
    Ok(Value::Array(policies))
}

/// The issues table's name: created by the stack, or named by the stream ARN parameter.
fn issues_table(parameter: &dyn Fn(&str) -> String) -> String {
    match parameter("IssuesTableStreamArn") {
        arn if arn.is_empty() => physical("IssuesTable"),
        arn => arn.split('/').nth(1).unwrap_or_default().to_owned(),
    }
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

/// Each state machine, the backfill's, the verify's and the restore's, may invoke only its own
/// function, and start, watch and stop only its own child executions (a Distributed Map runs each
/// segment, batch or partition as one); its definition invokes that same function. The restore's
/// may list the archive too (its `ItemReader`), and nothing else of S3.
#[test]
fn each_state_machine_invokes_only_its_function_and_runs_only_its_own_children() -> Result<()> {
    let archive = format!("arn:aws:s3:::{}", physical("ArchiveBucket"));
    for (machine, role, function, maps, lists) in [
        (
            "BackfillStateMachine",
            "BackfillStateMachineRole",
            "BackfillFunction",
            &[("EachSegment", "Touch")][..],
            None,
        ),
        (
            "VerifyStateMachine",
            "VerifyStateMachineRole",
            "VerifierFunction",
            &[("EachSegment", "Check")][..],
            None,
        ),
        (
            "RestoreStateMachine",
            "RestoreStateMachineRole",
            "RestoreFunction",
            &[("Split", "SplitBatch"), ("Restore", "Put")][..],
            Some(archive.as_str()),
        ),
    ] {
        one_state_machine(machine, role, function, maps, lists).with_context(|| machine.to_owned())?;
    }
    Ok(())
}

fn one_state_machine(
    machine_id: &str,
    role: &str,
    function_id: &str,
    maps: &[(&str, &str)],
    lists: Option<&str>,
) -> Result<()> {
    let template = template()?;
    let parameters = jobs_on();
    let resolver = template.resolver(&parameters, names());
    let resources = &template.root()["Resources"];
    let machine = resolver.resolve(&resources[machine_id]["Properties"], machine_id)?.context(
        "the state machine exists with EnableBackfill, IndexVerifySchedule and EnableArchiveRestore",
    )?;
    let function = format!("arn:aws:lambda:{REGION}:{ACCOUNT}:function:{}", physical(function_id));
    let substitution = format!("{function_id}Arn");
    ensure!(machine["DefinitionSubstitutions"][&substitution] == function.as_str(), "{machine:#}");
    let states = &machine["Definition"]["States"];
    let invokes = format!("${{{substitution}}}");
    for (map, task) in maps {
        let processor = &states[*map]["ItemProcessor"];
        let touch = &processor["States"][*task];
        ensure!(
            touch["Parameters"]["FunctionName"] == invokes.as_str()
                && processor["ProcessorConfig"]["Mode"] == "DISTRIBUTED",
            "{map}: {touch:#}"
        );
        ensure!(map_result_fits(&machine, map), "{map}: its children's outputs could pass 256 KiB");
        for (name, state) in processor["States"].as_object().into_iter().flatten() {
            if state["Type"] == "Task" {
                ensure!(state["Parameters"]["FunctionName"] == invokes.as_str(), "{name}: {state}");
            }
        }
    }
    // Every task invokes the one function.
    for (name, state) in states.as_object().into_iter().flatten() {
        if state["Type"] == "Task" {
            ensure!(state["Parameters"]["FunctionName"] == invokes.as_str(), "{name}: {state}");
        }
    }
    let name = machine["Name"].as_str().context("the state machine is named")?;
    // Step Functions names are at most 80 characters; CloudFormation's stack names 128.
    let longest = "s".repeat(128);
    let long_names = Names { stack: longest.clone(), ..names() };
    let long = template
        .resolver(&parameters, long_names)
        .resolve(&resources[machine_id]["Properties"]["Name"], "Name")?
        .context("a name")?;
    let long = long.as_str().context("a name")?;
    ensure!(
        long.len() <= 80 && long.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
        "a {}-character stack names its state machine {long}",
        longest.len()
    );
    let own = format!("arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}");
    let children = format!("arn:aws:states:{REGION}:{ACCOUNT}:execution:{name}/*");
    // Where a `ResultWriter` writes its children's outputs, for a machine that has one.
    let writes_results = maps.iter().any(|(map, _)| states[*map].get("ResultWriter").is_some());
    let results = format!("arn:aws:s3:::{}/map-runs/*", physical("RestoreBucket"));
    let policies = resolver
        .resolve(&resources[role]["Properties"]["Policies"], "role")?
        .context("the role has policies")?;
    let mut granted = BTreeSet::new();
    for statement in statements(&policies) {
        for action in strings(&statement["Action"]) {
            for resource in strings(&statement["Resource"]) {
                let allowed = match action.as_str() {
                    "lambda:InvokeFunction" => resource == function,
                    "states:StartExecution" => resource == own,
                    "states:DescribeExecution" | "states:StopExecution" => resource == children,
                    "s3:ListBucket" => Some(resource.as_str()) == lists,
                    // A `ResultWriter`'s objects (Step Functions developer guide, IAM policies for
                    // using Distributed Map states).
                    "s3:PutObject"
                    | "s3:GetObject"
                    | "s3:ListMultipartUploadParts"
                    | "s3:AbortMultipartUpload" => writes_results && resource == results,
                    // Step Functions' log delivery takes no resource but "*".
                    a if a.starts_with("logs:") => resource == "*",
                    _ => false,
                };
                ensure!(allowed, "{action} on {resource} is more than the state machine needs");
            }
            granted.insert(action);
        }
    }
    for needed in ["lambda:InvokeFunction", "states:StartExecution", "states:DescribeExecution"] {
        ensure!(granted.contains(needed), "the state machine needs {needed}: {granted:?}");
    }
    ensure!(lists.is_none() || granted.contains("s3:ListBucket"), "its ItemReader lists the archive");
    Ok(())
}

/// Whether a Distributed Map's result stays under the 256 KiB a state's result may be: each
/// child's output is small and fixed, so that 1,000 (`States.ArrayRange`'s most) fit, or the
/// children's outputs go to the restore bucket (`ResultWriter`). `ResultPath: null` is not
/// enough: it drops the result once the result is made, past the limit for millions of children.
fn map_result_fits(machine: &Value, map: &str) -> bool {
    let state = &machine["Definition"]["States"][map];
    let small = state["ItemProcessor"]["States"].as_object().into_iter().flatten().any(|(_, s)| {
        s["Type"] == "Pass" && s["End"] == true && s["Result"].to_string().len() * 1000 < 256 * 1024
    });
    let writer = &state["ResultWriter"];
    let written = writer["Resource"] == "${PutObject}"
        && machine["DefinitionSubstitutions"]["PutObject"] == "arn:aws:states:::s3:putObject"
        && writer["Parameters"]["Bucket"] == "${RestoreBucket}"
        && machine["DefinitionSubstitutions"]["RestoreBucket"] == physical("RestoreBucket").as_str()
        && writer["Parameters"]["Prefix"] == "map-runs";
    small || written
}

/// On a global table (`ArchiveRegion`, docs/global-tables.md): the archiving Region's archiver
/// takes every `REMOVE` and checks the TTL attribute itself; elsewhere no archiver runs, alone or
/// combined; without the parameter, the archiver takes TTL deletes only.
#[test]
fn a_global_tables_archiving_region_takes_replicated_ttl_deletes() -> Result<()> {
    let template = template()?;
    let ttl_only = r#"{"eventName":["REMOVE"],"userIdentity":{"type":["Service"],"principalId":["dynamodb.amazonaws.com"]}}"#;
    let every_remove = r#"{"eventName":["REMOVE"]}"#;
    // (ArchiveRegion, the archiver's filter and ARCHIVE_REPLICATED_TTL_ATTRIBUTE, if it runs)
    let cases = [
        ("", Some((ttl_only, None))),
        (REGION, Some((every_remove, Some("expires_at")))),
        ("eu-west-1", None),
    ];
    for (region, expected) in cases {
        for consumers in ["Separate", "Combined"] {
            let parameters: BTreeMap<String, String> = [
                ("ArchiveRegion".to_owned(), region.to_owned()),
                ("Consumers".to_owned(), consumers.to_owned()),
            ]
            .into();
            let functions = template.functions(&template.resolver(&parameters, names()))?;
            let archiver = functions.iter().find_map(|f| match f.binary.as_deref() {
                Some("ttl-archiver") => Some((f.streams[0].filters.clone(), f)),
                Some(COMBINED)
                    if f.environment[sidestream_combined::COMBINED_FUNCTIONS].contains("ttl-archiver") =>
                {
                    let own: Value =
                        serde_json::from_str(&f.environment[stream_runtime::combined::FILTERS_VAR]).ok()?;
                    Some((vec![own["ttl-archiver"][0].to_string()], f))
                }
                _ => None,
            });
            let got = archiver.map(|(filters, f)| {
                (filters, f.environment.get("ARCHIVE_REPLICATED_TTL_ATTRIBUTE").cloned())
            });
            let want = expected.map(|(filter, attribute)| {
                (
                    vec![serde_json::from_str::<Value>(filter).map(|v| v.to_string()).unwrap_or_default()],
                    attribute.map(str::to_owned),
                )
            });
            let got = got.map(|(filters, attribute)| {
                let filters = filters
                    .iter()
                    .map(|f| serde_json::from_str::<Value>(f).map(|v| v.to_string()).unwrap_or_default())
                    .collect::<Vec<_>>();
                (filters, attribute)
            });
            ensure!(got == want, "ArchiveRegion {region:?}, {consumers}: {got:?}, expected {want:?}");
        }
    }
    Ok(())
}

/// From Kinesis, every mapping filters the change record in each record's `data` exactly as it
/// filters the record itself from the DynamoDB stream, so both sources pass the same changes.
#[test]
fn kinesis_mappings_filter_the_change_records_the_stream_mappings_filter() -> Result<()> {
    let template = template()?;
    let kinesis = [("IssuesChangeSource", "Kinesis"), ("CounterChangeSource", "Kinesis")];
    let mut compared = 0;
    for extra in [
        &[][..],
        &[("IndexedAttribute", "tags"), ("IndexedAttributeType", "SS")][..],
        &[("Consumers", "Combined"), ("IndexedAttribute", "tags"), ("IndexedAttributeType", "SS")][..],
        &[("Consumers", "Combined"), ("ArchiveRegion", REGION)][..],
    ] {
        let parameters = |source: &[(&str, &str)]| -> BTreeMap<String, String> {
            extra.iter().chain(source).map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        let streams = template.functions(&template.resolver(&parameters(&[]), names()))?;
        let from_kinesis = template.functions(&template.resolver(&parameters(&kinesis), names()))?;
        for (s, k) in streams.iter().zip(&from_kinesis) {
            ensure!(s.logical_id == k.logical_id, "the same functions");
            if s.streams.is_empty() {
                continue;
            }
            ensure!(
                self::from_kinesis(k) && !self::from_kinesis(s),
                "{}: {} then {}",
                s.logical_id,
                s.streams[0].stream,
                k.streams[0].stream
            );
            let normal = |patterns: Vec<String>| -> Result<Vec<Value>> {
                patterns.iter().map(|p| Ok(serde_json::from_str(p)?)).collect()
            };
            ensure!(
                normal(change_patterns(s)?)? == normal(change_patterns(k)?)?,
                "{extra:?} {}: {:?} from the stream, {:?} from Kinesis",
                s.logical_id,
                s.streams[0].filters,
                k.streams[0].filters
            );
            compared += s.streams[0].filters.len();
        }
    }
    // The archiver's, the aggregator's, and the indexer's for a set attribute, each compared.
    ensure!(compared >= 12, "{compared} filters compared");
    Ok(())
}

/// GitHub's anchor of a Markdown heading: lower case, punctuation but hyphens dropped, spaces
/// as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every alarm reaches someone and says what to do, in every deployment: its ALARM and OK
/// actions are the alarm topic (the stack's own unless `AlarmTopicArn` gives one), and its
/// description links a runbook section that docs/operations.md has. Every function has an
/// `Errors` alarm (an init failure writes no metric of Sidestream's), every state machine a
/// failed-executions alarm, and Lambda's REPORT lines are kept (`SystemLogLevel` INFO or DEBUG).
#[test]
fn every_alarm_reaches_someone_and_says_what_to_do() -> Result<()> {
    let template = template()?;
    let runbook =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md"))?;
    let anchors: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("### ").or_else(|| l.strip_prefix("## ")))
        .map(anchor)
        .collect();
    let system_level =
        template.root().pointer("/Globals/Function/LoggingConfig/SystemLogLevel").and_then(Value::as_str);
    ensure!(
        matches!(system_level, Some("INFO" | "DEBUG")),
        "SystemLogLevel {system_level:?} drops Lambda's REPORT lines"
    );
    let given = "arn:aws:sns:us-east-1:123456789012:oncall";
    let mut all = deployments();
    all.push(("an existing alarm topic", set(&[("AlarmTopicArn", given)])));
    let mut checked = 0;
    for (deployment, parameters) in all {
        let resolver = template.resolver(&parameters, names());
        let topic = if parameters.contains_key("AlarmTopicArn") {
            given.to_owned()
        } else {
            resolver.string(&serde_json::json!({"Ref": "AlarmTopic"}), "AlarmTopic")?
        };
        let mut watched = BTreeSet::new();
        for (alarm, p) in resolver.resolved("AWS::CloudWatch::Alarm")? {
            // OK too, but for an event waiting in the parking bucket (the_alarms_stay_…).
            let ok = (!is_event_alarm(&p)).then(|| serde_json::json!([topic]));
            ensure!(
                p["AlarmActions"] == serde_json::json!([topic]) && p.get("OKActions") == ok.as_ref(),
                "{deployment}: {alarm}'s actions are {} and {}, not the alarm topic {topic}",
                p["AlarmActions"],
                p["OKActions"]
            );
            let description = p["AlarmDescription"].as_str().unwrap_or_default();
            let link = description
                .split("Runbook: docs/operations.md#")
                .nth(1)
                .map(|rest| rest.trim_end_matches('.'))
                .with_context(|| format!("{alarm}: no runbook link in {description:?}"))?;
            ensure!(anchors.contains(link), "{alarm}: docs/operations.md has no section #{link}");
            for metric in alarm_metrics(&p) {
                watched.insert((
                    metric["MetricName"].as_str().unwrap_or_default().to_owned(),
                    metric["Dimensions"][0]["Value"].as_str().unwrap_or_default().to_owned(),
                ));
            }
            checked += 1;
        }
        for function in template.functions(&resolver)? {
            let name = physical(&function.logical_id);
            ensure!(
                watched.contains(&("Errors".to_owned(), name.clone())),
                "{deployment}: {} has no Errors alarm",
                function.logical_id
            );
        }
        // A mapping that stops reading (disabled, or stopped by Lambda) sends no IteratorAge:
        // only its PolledEventCount, against its source's writes, shows it.
        for function in template.functions(&resolver)? {
            for stream in &function.streams {
                let mapping = format!("{}{}", function.logical_id, stream.name);
                let uuid = resolver.string(&serde_json::json!({"Ref": mapping}), &mapping)?;
                ensure!(
                    watched.contains(&("PolledEventCount".to_owned(), uuid)),
                    "{deployment}: no alarm watches {mapping}'s PolledEventCount"
                );
            }
        }
        for machine in resolver.existing("AWS::Serverless::StateMachine")? {
            let arn = resolver.string(&serde_json::json!({"Ref": machine}), machine)?;
            ensure!(
                watched.contains(&("ExecutionsFailed".to_owned(), arn)),
                "{deployment}: {machine} has no failed-executions alarm"
            );
        }
    }
    ensure!(checked > 200, "{checked} alarms checked");
    Ok(())
}

/// The template read as a reviewer reads it for production: what AWS refuses at deploy time is
/// refused by the parameters, the source tables cannot be deleted by accident, the parking bucket
/// (every mapping's on-failure destination) outlives the stack, the state machine's role trusts only this account's state machine and its
/// Lambda integration names the stack's partition, and the scheduled verifier is not retried
/// (each retry is two more full scans).
#[test]
fn the_template_holds_what_a_production_review_asks() -> Result<()> {
    let template = template()?;
    let root = template.root();
    // Lambda takes -1, or 60 to 604,800 seconds; -1 is refused (the stream would drop the records).
    let age = &root["Parameters"]["MaximumRecordAgeInSeconds"];
    let pattern = regex_lite::Regex::new(age["AllowedPattern"].as_str().context("a pattern")?)?;
    for (value, accepted) in [
        ("-1", false),
        ("60", true),
        ("86400", true),
        ("604800", true),
        ("0", false),
        ("59", false),
        ("-2", false),
        ("604801", false),
        ("1000000", false),
    ] {
        ensure!(
            pattern.is_match(value) == accepted,
            "MaximumRecordAgeInSeconds {value}: accepted {}",
            pattern.is_match(value)
        );
    }
    for (n, value) in (60..=604_800).step_by(997).enumerate() {
        ensure!(pattern.is_match(&value.to_string()), "{value} ({n})");
    }
    let resources = &root["Resources"];
    for table in ["IssuesTable", "CounterTable"] {
        ensure!(
            resources[table]["Properties"]["DeletionProtectionEnabled"] == true
                && resources[table]["DeletionPolicy"] == "Retain",
            "{table}: deletion protection, retained"
        );
    }
    ensure!(
        resources["ParkingBucket"]["DeletionPolicy"] == "Retain"
            && resources["ParkingBucket"]["UpdateReplacePolicy"] == "Retain",
        "the parking bucket, which keeps what was given up, outlives the stack"
    );
    // A change that would replace the index fails loudly: a named resource is never replaced.
    let index = &resources["IndexTable"];
    ensure!(
        index["Properties"]["TableName"].is_object() && index["UpdateReplacePolicy"] == "Retain",
        "the index table is named, and a replaced one kept: {index}"
    );
    let parameters = BTreeMap::from([
        ("EnableBackfill".to_owned(), "true".to_owned()),
        ("IndexVerifySchedule".to_owned(), "rate(1 day)".to_owned()),
    ]);
    let resolver = template.resolver(&parameters, names());
    for role in ["BackfillStateMachineRole", "VerifyStateMachineRole"] {
        let trust = resolver
            .resolve(&resources[role]["Properties"]["AssumeRolePolicyDocument"], "trust")?
            .context("a trust policy")?;
        for statement in trust["Statement"].as_array().context("statements")? {
            ensure!(
                statement["Condition"]["StringEquals"]["aws:SourceAccount"] == ACCOUNT
                    && statement["Condition"]["ArnLike"]["aws:SourceArn"]
                        .as_str()
                        .is_some_and(|arn| arn
                            .starts_with(&format!("arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:"))),
                "{role} trusts only this account's state machine: {statement}"
            );
        }
    }
    let machine = resolver
        .resolve(&resources["BackfillStateMachine"]["Properties"], "machine")?
        .context("the state machine")?;
    let touch = &machine["Definition"]["States"]["EachSegment"]["ItemProcessor"]["States"]["Touch"];
    ensure!(
        touch["Resource"] == "${LambdaInvoke}"
            && machine["DefinitionSubstitutions"]["LambdaInvoke"] == "arn:aws:states:::lambda:invoke",
        "the Lambda integration is the stack's partition's: {touch}"
    );
    // The schedule starts the verify job, whose state machine invokes the verifier, held to
    // IndexVerifyConcurrency: the function has no event of its own.
    let verifier = &resources["VerifierFunction"]["Properties"];
    let job = &resources["VerifyStateMachine"]["Properties"];
    ensure!(
        verifier.get("Events").is_none()
            && verifier["ReservedConcurrentExecutions"]["Ref"] == "IndexVerifyConcurrency"
            && job["Events"]["Schedule"]["Properties"]["ScheduleExpression"]["Ref"] == "IndexVerifySchedule"
            && job["DefinitionSubstitutions"]["Concurrency"]["Ref"] == "IndexVerifyConcurrency",
        "the schedule starts the job, and the verifier's concurrency is the job's: {verifier} {job}"
    );
    // The backfill can be held to a share of the account's concurrency.
    let paced = set(&[("EnableBackfill", "true"), ("BackfillReservedConcurrency", "8")]);
    let backfill = template
        .resolver(&paced, names())
        .resolve(&resources["BackfillFunction"]["Properties"], "backfill")?
        .context("the backfill function")?;
    ensure!(backfill["ReservedConcurrentExecutions"] == "8", "{}", backfill["ReservedConcurrentExecutions"]);
    Ok(())
}

/// Every parameter's default is a value the parameter itself admits (its `AllowedPattern`, its
/// `AllowedValues`): a default CloudFormation would refuse fails here, not at deploy time.
#[test]
fn every_parameters_default_is_admitted() -> Result<()> {
    let template = template()?;
    let root = template.root();
    for (name, parameter) in root["Parameters"].as_object().context("parameters")? {
        let default = match &parameter["Default"] {
            Value::String(text) => text.clone(),
            Value::Null => continue,
            other => other.to_string(),
        };
        admits(name, parameter, &default).context("its default")?;
    }
    Ok(())
}

/// Whether the parameter `declaration` admits `value`: its `AllowedPattern`, its `AllowedValues`.
fn admits(name: &str, declaration: &Value, value: &str) -> Result<()> {
    if let Some(pattern) = declaration["AllowedPattern"].as_str() {
        ensure!(
            regex_lite::Regex::new(pattern)?.is_match(value),
            "{name}: {value:?} does not match its AllowedPattern"
        );
    }
    if let Some(values) = declaration["AllowedValues"].as_array() {
        ensure!(
            values.iter().any(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned) == value),
            "{name}: {value:?} is not among its AllowedValues"
        );
    }
    Ok(())
}

/// The archive, the only copy of what TTL deleted: previous versions are kept a year by default,
/// only objects over 128 KB move to Glacier (on purpose, and said so), and objects expire only
/// when `ArchiveExpireAfterDays` asks, and then whatever their size.
#[test]
fn the_archive_keeps_what_ttl_deleted_as_long_as_asked() -> Result<()> {
    let template = template()?;
    let resources = &template.root()["Resources"];
    for (expire, expected) in [("", Value::Null), ("3650", Value::from("3650"))] {
        let bucket = template
            .resolver(&set(&[("ArchiveExpireAfterDays", expire)]), names())
            .resolve(&resources["ArchiveBucket"]["Properties"], "archive")?
            .context("the archive bucket")?;
        let rules = bucket["LifecycleConfiguration"]["Rules"].as_array().context("lifecycle rules")?;
        for rule in rules {
            if rule["Transitions"].is_array() {
                ensure!(
                    rule["ObjectSizeGreaterThan"] == 131_072 && rule["ExpirationInDays"].is_null(),
                    "{rule}"
                );
            } else {
                ensure!(
                    rule["NoncurrentVersionExpiration"]["NoncurrentDays"] == "365"
                        && rule["ExpirationInDays"] == expected
                        && rule["ObjectSizeGreaterThan"].is_null(),
                    "{rule}"
                );
            }
        }
        ensure!(rules.len() == 2, "{rules:?}");
    }
    Ok(())
}

/// Every mapping gives up to the parking bucket, an S3 destination that keeps the records, and
/// while the stream still holds them: a record age below the stream's 24 hours, the archiver's
/// never -1 (its source items are gone once TTL deleted them), and the archiver retrying until
/// that age rather than giving a shard's deletions up during an S3 outage (docs/deploying.md,
/// "Nothing given up is lost").
#[test]
fn nothing_given_up_is_lost() -> Result<()> {
    const STREAM_RETENTION: i64 = 86_400;
    let template = template()?;
    let mut archiving_mappings = 0;
    for (deployment, parameters) in deployments().into_iter().chain(kinesis_deployments()) {
        let resolver = template.resolver(&parameters, names());
        for function in template.functions(&resolver)? {
            let archives = function.environment.contains_key("ARCHIVE_BUCKET");
            for source in &function.streams {
                let at = format!("{deployment}: {} {}", function.logical_id, source.name);
                ensure!(
                    source.on_failure.as_deref()
                        == Some(format!("arn:aws:s3:::{}", physical("ParkingBucket")).as_str()),
                    "{at}: gives up to the parking bucket, not {:?}",
                    source.on_failure
                );
                let age = source.maximum_record_age.context("a record age")?;
                ensure!(
                    (60..STREAM_RETENTION).contains(&age),
                    "{at}: a range is given up while the stream holds it (age {age})"
                );
                if archives {
                    archiving_mappings += 1;
                    ensure!(
                        source.maximum_retry_attempts == Some(-1),
                        "{at}: the archiver retries until its record age: {:?}",
                        source.maximum_retry_attempts
                    );
                }
            }
        }
    }
    ensure!(archiving_mappings > 2, "archiving mappings checked: {archiving_mappings}");
    let root = template.root();
    let age = &root["Parameters"]["ArchiverMaximumRecordAgeInSeconds"];
    let pattern = regex_lite::Regex::new(age["AllowedPattern"].as_str().context("a pattern")?)?;
    for refused in ["-1", "0", "59", "604801"] {
        ensure!(!pattern.is_match(refused), "the archiver's record age admits {refused}");
    }
    Ok(())
}

/// No role writes the application's tables unconditioned: a touch (the backfiller's, the
/// repairing verifier's) may set only the touch markers of an item, its key named in the
/// condition, and return nothing; the aggregator writes only the counter table's total items.
#[test]
fn no_role_writes_a_source_table_unconditioned() -> Result<()> {
    const WRITES: [&str; 4] =
        ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"];
    let template = template()?;
    let mut checked = BTreeSet::new();
    let mut all = deployments();
    all.push((
        "backfill and repairs",
        set(&[
            ("EnableBackfill", "true"),
            ("IndexVerifySchedule", "rate(1 day)"),
            ("IndexVerifyRepair", "true"),
        ]),
    ));
    for (deployment, parameters) in all {
        let resolver = template.resolver(&parameters, names());
        let parameter = |name: &str| parameters.get(name).cloned().unwrap_or_default();
        let table = |name: String| format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}");
        let issues = table(issues_table(&parameter));
        // The key (BaseKeyAttributes) and the two markers: nothing else of an item.
        let key = match parameter("BaseKeyAttributes") {
            given if given.is_empty() => "id".to_owned(),
            given => given,
        };
        let touchable: Vec<String> =
            key.split(',').chain(formats::touch::MARKERS).map(str::to_owned).collect();
        let counters = table(match parameter("CounterTableStreamArn") {
            arn if arn.is_empty() => physical("CounterTable"),
            arn => arn.split('/').nth(1).unwrap_or_default().to_owned(),
        });
        for (role, statements) in role_statements(template, &resolver)? {
            for statement in statements {
                let writes = strings(&statement["Action"]).into_iter().any(|a| WRITES.contains(&a.as_str()));
                let resources = strings(&statement["Resource"]);
                let at = format!("{deployment}: {role} {}", statement["Sid"]);
                if writes && resources.contains(&issues) && role == "RestoreRole" {
                    // The restore puts whole items back into the issues table: that is what an
                    // operator starts it for, as an application's write (the stream then brings
                    // each item into the index), and nothing else of the table.
                    ensure!(
                        strings(&statement["Action"])
                            == ["dynamodb:DescribeTable", "dynamodb:PutItem", "dynamodb:BatchWriteItem"]
                            && resources == [issues.clone()],
                        "{at}: the restore writes more than items of the issues table: {statement}"
                    );
                    checked.insert(role.to_owned());
                    continue;
                }
                if writes && resources.contains(&issues) {
                    let condition = &statement["Condition"];
                    ensure!(
                        strings(&statement["Action"]) == ["dynamodb:UpdateItem"]
                            && strings(&condition["ForAllValues:StringEquals"]["dynamodb:Attributes"])
                                == touchable
                            && strings(&condition["StringEqualsIfExists"]["dynamodb:ReturnValues"])
                                == ["NONE"],
                        "{at}: writes the issues table beyond a touch: {statement}"
                    );
                    checked.insert(role.to_owned());
                }
                if writes && resources.contains(&counters) {
                    ensure!(
                        strings(&statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"])
                            == ["COUNTER#*#TOTAL"],
                        "{at}: writes the counter table beyond its totals: {statement}"
                    );
                    checked.insert(role.to_owned());
                }
            }
        }
    }
    ensure!(
        checked.len() == 4,
        "the backfiller's, the verifier's, the restorer's and the aggregator's writes checked: {checked:?}"
    );
    Ok(())
}

/// The archive can be locked (Object Lock, governance mode, `ArchiveObjectLockDays`) and guarded
/// (`ArchiveAdminRoleArn`: only that role may delete versions, bypass retention, or change the
/// bucket's lifecycle, versioning, lock or policy); both are off by default.
#[test]
fn the_archive_can_be_locked_and_guarded() -> Result<()> {
    const ADMIN: &str = "arn:aws:iam::123456789012:role/archive-admin";
    let template = template()?;
    let resources = &template.root()["Resources"];
    for (lock, admin) in [("", ""), ("3650", ADMIN)] {
        let resolver = template
            .resolver(&set(&[("ArchiveObjectLockDays", lock), ("ArchiveAdminRoleArn", admin)]), names());
        let bucket = resolver
            .resolve(&resources["ArchiveBucket"]["Properties"], "archive")?
            .context("the archive bucket")?;
        let policy = resolver
            .resolve(&resources["ArchiveBucketTlsOnly"]["Properties"], "policy")?
            .context("the archive's policy")?;
        let statements = policy["PolicyDocument"]["Statement"].as_array().context("statements")?;
        if lock.is_empty() {
            ensure!(
                bucket["ObjectLockEnabled"].is_null()
                    && bucket["ObjectLockConfiguration"].is_null()
                    && statements.len() == 1,
                "off by default: {bucket} {policy}"
            );
            continue;
        }
        let retention = &bucket["ObjectLockConfiguration"]["Rule"]["DefaultRetention"];
        ensure!(
            bucket["ObjectLockEnabled"] == true
                && bucket["VersioningConfiguration"]["Status"] == "Enabled"
                && retention["Mode"] == "GOVERNANCE"
                && retention["Days"] == lock,
            "{bucket}"
        );
        let guard =
            statements.iter().find(|s| s["Sid"] == "OnlyTheArchiveAdminRemoves").context("the guard")?;
        let actions = strings(&guard["Action"]);
        for needed in [
            "s3:DeleteObject",
            "s3:DeleteObjectVersion",
            "s3:BypassGovernanceRetention",
            "s3:PutLifecycleConfiguration",
            "s3:PutBucketVersioning",
            "s3:PutBucketObjectLockConfiguration",
            "s3:PutBucketPolicy",
        ] {
            ensure!(actions.iter().any(|a| a == needed), "{needed} denied: {guard}");
        }
        ensure!(
            guard["Effect"] == "Deny"
                && guard["Principal"] == "*"
                && guard["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] == ADMIN
                && strings(&guard["Resource"]).len() == 2,
            "{guard}"
        );
    }
    Ok(())
}

/// The key parameters and the service each key may be used through.
const KEYS: [(&str, &str); 4] = [
    ("IssuesTableKmsKeyArn", "dynamodb"),
    ("IndexTableKmsKeyArn", "dynamodb"),
    ("CounterTableKmsKeyArn", "dynamodb"),
    ("ArchiveBucketKmsKeyArn", "s3"),
];

/// Existing tables and a bucket encrypted with customer managed keys: each role that reads or
/// writes one may use its key, through that resource's service only (`kms:ViaService`), and no
/// role may use a key otherwise; with no key given, no role has a KMS action.
#[test]
fn customer_managed_keys_are_used_through_their_service() -> Result<()> {
    let template = template()?;
    let key = |n: u8| format!("arn:aws:kms:{REGION}:{ACCOUNT}:key/0000000{n}-aaaa-bbbb-cccc-dddddddddddd");
    let mut keyed = set(&[
        ("IssuesTableStreamArn", ISSUES_STREAM),
        ("IndexTableName", "index"),
        ("CounterTableStreamArn", COUNTER_STREAM),
        ("ArchiveBucketName", "archive"),
        ("EnableBackfill", "true"),
        ("IndexVerifySchedule", "rate(1 day)"),
    ]);
    for (n, (parameter, _)) in (1..).zip(KEYS) {
        keyed.insert(parameter.to_owned(), key(n));
    }
    let mut combined = keyed.clone();
    combined.insert("Consumers".to_owned(), "Combined".to_owned());
    let expected: BTreeMap<&str, &[u8]> = BTreeMap::from([
        ("IndexerRole", &[1, 2][..]),
        ("ArchiverRole", &[1, 4][..]),
        ("AggregatorRole", &[3][..]),
        ("BackfillRole", &[1][..]),
        ("VerifierRole", &[1, 2][..]),
        ("IssuesStreamRole", &[1, 2, 4][..]),
        ("BackfillStateMachineRole", &[][..]),
        ("VerifyStateMachineRole", &[][..]),
        ("PreTrafficHookRole", &[][..]),
        ("CodeDeployRole", &[][..]),
    ]);
    for (deployment, parameters, keys_given) in
        [("defaults", set(&[]), false), ("keyed", keyed, true), ("keyed, combined", combined, true)]
    {
        let resolver = template.resolver(&parameters, names());
        for (role, statements) in role_statements(template, &resolver)? {
            let mut used = BTreeSet::new();
            for statement in statements {
                if !strings(&statement["Action"]).iter().any(|a| a.starts_with("kms:")) {
                    continue;
                }
                let resources = strings(&statement["Resource"]);
                let via = statement["Condition"]["StringEquals"]["kms:ViaService"].as_str();
                let [resource] = resources.as_slice() else {
                    bail!("{deployment}: {role}: one key per statement: {statement}");
                };
                let (n, service) = (1..)
                    .zip(KEYS)
                    .find(|(_, (p, _))| parameters.get(*p) == Some(resource))
                    .map(|(n, (_, service))| (n, service))
                    .with_context(|| {
                        format!("{deployment}: {role} uses a key no parameter gives: {resource}")
                    })?;
                ensure!(
                    via == Some(format!("{service}.{REGION}.amazonaws.com").as_str()),
                    "{deployment}: {role} uses {resource} not only through {service}: {statement}"
                );
                used.insert(n);
            }
            let wanted: BTreeSet<u8> = if keys_given {
                expected
                    .get(role)
                    .with_context(|| format!("a role this test does not know: {role}"))?
                    .iter()
                    .copied()
                    .collect()
            } else {
                BTreeSet::new()
            };
            ensure!(used == wanted, "{deployment}: {role} uses keys {used:?}, wanted {wanted:?}");
        }
    }
    Ok(())
}

/// Every alarm's evaluation range is one `PutMetricAlarm` accepts: `Period` times
/// `EvaluationPeriods` at most a day for periods under an hour, at most seven days otherwise, and
/// `DatapointsToAlarm` no more than `EvaluationPeriods`: with its parameters' defaults and with
/// their largest values.
#[test]
fn every_alarms_evaluation_range_is_one_cloudwatch_accepts() -> Result<()> {
    let template = template()?;
    let root = template.root();
    let mut largest = set(&[("IndexVerifySchedule", "rate(1 day)"), ("EnableBackfill", "true")]);
    for (name, parameter) in root["Parameters"].as_object().context("parameters")? {
        if let Some(max) = parameter["MaxValue"].as_i64() {
            largest.insert(name.clone(), max.to_string());
        }
    }
    let mut checked = 0;
    for (deployment, parameters) in deployments().into_iter().chain([("largest", largest)]) {
        let resolver = template.resolver(&parameters, names());
        for (alarm, p) in resolver.resolved("AWS::CloudWatch::Alarm")? {
            let number =
                |field: &str| number_of(&p[field]).with_context(|| format!("{deployment}: {alarm}: {field}"));
            // Metric math: its metric queries' period, one for all of them.
            let periods_of_queries: BTreeSet<i64> = p["Metrics"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|q| q.pointer("/MetricStat/Period"))
                .map(number_of)
                .collect::<Result<_>>()?;
            let period = match periods_of_queries.iter().collect::<Vec<_>>()[..] {
                [] => number("Period")?,
                [period] => *period,
                _ => bail!("{deployment}: {alarm}: its queries' periods differ: {periods_of_queries:?}"),
            };
            let periods = number("EvaluationPeriods")?;
            let datapoints =
                if p["DatapointsToAlarm"].is_null() { periods } else { number("DatapointsToAlarm")? };
            let limit = if period < 3600 { 86_400 } else { 604_800 };
            ensure!(
                period * periods <= limit && (1..=periods).contains(&datapoints),
                "{deployment}: {alarm}: {periods} periods of {period} s ({datapoints} to alarm) over {limit} s"
            );
            checked += 1;
        }
    }
    ensure!(checked > 100, "alarms checked: {checked}");
    Ok(())
}

fn number_of(value: &Value) -> Result<i64> {
    match value {
        Value::Number(n) => n.as_i64().context("an integer"),
        Value::String(s) => Ok(s.parse()?),
        other => bail!("not a number: {other}"),
    }
}

/// Whether an alarm watches an event whose consequence waits in the parking bucket (a record
/// parked, a range given up) or a failed (or timed-out) execution: it notifies ALARM only. An
/// alarm on metric math is one when every metric it reads is.
fn is_event_alarm(p: &Value) -> bool {
    let metrics = alarm_metrics(p);
    !metrics.is_empty()
        && metrics.iter().all(|m| {
            matches!(
                m["MetricName"].as_str(),
                Some("ParkedRecords" | "DroppedEventCount" | "ExecutionsFailed" | "ExecutionsTimedOut")
            )
        })
}

/// Every deployment's parameters, with the alarm destination each needs to pass the Rules.
fn deployable() -> Vec<(&'static str, BTreeMap<String, String>)> {
    let mut all = deployments();
    for (_, parameters) in &mut all {
        parameters.insert("AlarmEmail".to_owned(), "oncall@example.com".to_owned());
    }
    all
}

/// The Rules refuse an alarm destination left out by accident and parameter combinations that
/// would deploy but cannot work, and pass every deployment the tests make.
#[test]
fn the_rules_refuse_what_cannot_work() -> Result<()> {
    let template = template()?;
    for (deployment, parameters) in deployable() {
        let broken = template.resolver(&parameters, names()).broken_rules()?;
        ensure!(broken.is_empty(), "{deployment}: {broken:?}");
    }
    let topic = ("AlarmTopicArn", "arn:aws:sns:us-east-1:123456789012:pager");
    let key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    for (parameters, rule) in [
        (vec![], "AlarmsReachSomeone"),
        (vec![topic, ("AlarmEmail", "a@example.com")], "OneAlarmDestination"),
        (vec![topic, ("IssuesTableKmsKeyArn", key)], "ExistingTableKeys"),
        (vec![topic, ("IndexTableKmsKeyArn", key)], "ExistingTableKeys"),
        (
            vec![topic, ("ArchiveBucketName", "archive"), ("ArchiveObjectLockDays", "30")],
            "NewArchiveBucketOnly",
        ),
        (
            vec![topic, ("IndexTableName", "index"), ("IndexWarmWriteUnitsPerSecond", "12000")],
            "IndexTableSettingsNeedANewTable",
        ),
        (vec![topic, ("IndexVerifyRepair", "true")], "VerifierSettingsNeedASchedule"),
        // The types alone would make a filter no delete matches: every TTL delete dropped.
        (vec![topic, ("ArchiveEntityTypes", "issue")], "ArchiveEntitiesNamed"),
        (vec![topic, ("ArchiveEntityAttribute", "type")], "ArchiveEntitiesNamed"),
    ] {
        let broken = template.resolver(&set(&parameters), names()).broken_rules()?;
        ensure!(
            broken.len() == 1 && broken[0].starts_with(&format!("{rule}: ")),
            "{parameters:?}: broke {broken:?}, not only {rule}"
        );
    }
    // Values their declarations refuse, as CloudFormation refuses them before the Rules.
    let long = "x".repeat(2049);
    for (parameter, value, refusal) in [
        ("BackfillReservedConcurrency", "0", "below its MinValue"),
        ("BackfillReservedConcurrency", "1001", "above its MaxValue"),
        ("BackfillWriteUnitsPerSegment", "lots", "does not match its AllowedPattern"),
        ("Consumers", "Both", "is not one of its AllowedValues"),
        ("MultikeyIndexes", long.as_str(), "is longer than its MaxLength"),
        // A name the template does not declare, as CloudFormation refuses it, with the nearest.
        ("Batchsize", "10", "the template declares no such parameter; did you mean BatchSize?"),
    ] {
        let refused = template.resolver(&set(&[topic, (parameter, value)]), names()).refused_parameters();
        ensure!(
            refused.len() == 1
                && refused[0].starts_with(&format!("{parameter}: "))
                && refused[0].contains(refusal),
            "{parameter}={value}: {refused:?}"
        );
    }
    for (deployment, parameters) in deployable() {
        let refused = template.resolver(&parameters, names()).refused_parameters();
        ensure!(refused.is_empty(), "{deployment}: {refused:?}");
    }
    for (parameters, what) in [
        (vec![("AlarmOptOut", "true")], "an explicit opt-out"),
        (vec![("AlarmEmail", "a@example.com")], "an e-mail address"),
        (vec![topic], "a topic"),
    ] {
        let broken = template.resolver(&set(&parameters), names()).broken_rules()?;
        ensure!(broken.is_empty(), "{what}: {broken:?}");
    }
    Ok(())
}

/// Every stream mapping retries until its record age (never a count that gives ranges up in
/// minutes), and that age leaves the stream's records to the parking bucket.
#[test]
fn every_mapping_retries_until_its_record_age() -> Result<()> {
    let template = template()?;
    let mut mappings = 0;
    for (deployment, parameters) in deployable() {
        let resolver = template.resolver(&parameters, names());
        for function in template.functions(&resolver)? {
            for source in &function.streams {
                ensure!(
                    source.maximum_retry_attempts == Some(-1),
                    "{deployment}: {} retries {:?} times",
                    function.logical_id,
                    source.maximum_retry_attempts
                );
                let age = source.maximum_record_age.context("a record age")?;
                ensure!((3_600..86_400).contains(&age), "{deployment}: age {age}");
                mappings += 1;
            }
        }
    }
    ensure!(mappings > 40, "mappings checked: {mappings}");
    let age = &template.root()["Parameters"]["MaximumRecordAgeInSeconds"];
    let pattern = regex_lite::Regex::new(age["AllowedPattern"].as_str().context("a pattern")?)?;
    ensure!(!pattern.is_match("-1"), "-1 (the stream drops the records) is refused");
    Ok(())
}

/// The alarms stay in ALARM while their cause does: a recurring failure holds its alarm for 15
/// minutes after its last datapoint (no flapping between retries); an event waiting in the
/// parking bucket notifies ALARM only; a state read between datapoints (lag, drift, the parking
/// bucket's daily count) keeps its state while no data comes. No alarm notifies OK one quiet
/// minute after it fired.
#[test]
fn the_alarms_stay_while_their_cause_does() -> Result<()> {
    let template = template()?;
    let parameters = set(&[
        ("AlarmEmail", "a@example.com"),
        ("IndexVerifySchedule", "rate(1 day)"),
        ("EnableBackfill", "true"),
    ]);
    let resolver = template.resolver(&parameters, names());
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for (alarm, p) in resolver.resolved("AWS::CloudWatch::Alarm")? {
        let number = |key: &str| number_of(&p[key]);
        let metric = p["MetricName"].as_str().unwrap_or("metric math");
        let missing = p["TreatMissingData"].as_str().unwrap_or("missing");
        match metric {
            "Errors" | "SystemicFailures" | "ParkedRecords" | "DroppedEventCount" | "ExecutionsFailed" => {
                ensure!(
                    number("Period")? * number("EvaluationPeriods")? >= 900
                        && number("DatapointsToAlarm")? == 1,
                    "{alarm}: alarms at once and holds 15 minutes: {p}"
                );
                ensure!(
                    p["OKActions"].is_null() == is_event_alarm(&p),
                    "{alarm}: OK notified only for a recurring failure"
                );
            }
            "metric math" if is_event_alarm(&p) => {
                let period = p["Metrics"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|q| q.pointer("/MetricStat/Period"))
                    .map(number_of)
                    .next()
                    .transpose()?
                    .unwrap_or_default();
                ensure!(
                    period * number("EvaluationPeriods")? >= 900
                        && number("DatapointsToAlarm")? == 1
                        && p["OKActions"].is_null(),
                    "{alarm}: alarms at once, holds 15 minutes, notifies ALARM only: {p}"
                );
            }
            "IteratorAge" | "NumberOfObjects" => {
                ensure!(missing == "ignore", "{alarm}: keeps its state without data: {missing}");
            }
            "IndexDrift" if p["ComparisonOperator"] == "GreaterThanThreshold" => {
                ensure!(missing == "ignore", "{alarm}: drift stays until a verification reports none");
            }
            _ => {}
        }
        if !p["OKActions"].is_null() && missing == "notBreaching" && p["Metrics"].is_null() {
            ensure!(
                number("Period")? * number("EvaluationPeriods")? >= 900,
                "{alarm}: would notify OK a quiet minute after it fired: {p}"
            );
        }
        *kinds.entry(if is_event_alarm(&p) { "event" } else { "state" }).or_default() += 1;
    }
    ensure!(kinds.get("event") >= Some(&5) && kinds.get("state") >= Some(&15), "alarms checked: {kinds:?}");
    Ok(())
}

/// The three jobs on: the backfill, the scheduled verify and the restore, each a state machine
/// with its function and role.
fn jobs_on() -> BTreeMap<String, String> {
    set(&[
        ("EnableBackfill", "true"),
        ("IndexVerifySchedule", "rate(1 day)"),
        ("EnableArchiveRestore", "true"),
    ])
}

/// A production deployment (samconfig.toml's, with Kinesis, the verifier and the backfill on):
/// every store under `KmsKeyArn` ([`KEY`]), the index warmed.
fn production() -> BTreeMap<String, String> {
    set(&[
        ("AlarmEmail", "a@example.com"),
        ("KmsKeyArn", KEY),
        ("IssuesChangeSource", "Kinesis"),
        ("CounterChangeSource", "Kinesis"),
        ("IndexVerifySchedule", "rate(1 day)"),
        ("EnableBackfill", "true"),
        ("EnableArchiveRestore", "true"),
        ("GridApi", "true"),
        ("IndexWarmWriteUnitsPerSecond", "12000"),
    ])
}

/// The stack's customer managed key in [`production`].
const KEY: &str = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";

/// A resource's properties, resolved.
fn properties(template: &Template, resolver: &Resolver<'_>, id: &str) -> Result<Value> {
    resolver
        .resolve(&template.root()["Resources"][id]["Properties"], id)?
        .with_context(|| format!("{id}'s properties"))
}

/// What a production table needs of the stores the stack creates: the dashboard named per
/// Region, the index table protected and warmed, the archive bucket only where the stack
/// archives, an Athena workgroup name within its limit whatever the stack's name, and the
/// free-text parameters checked before they are substituted.
#[test]
fn the_stores_hold_at_scale() -> Result<()> {
    let template = template()?;
    let resources = &template.root()["Resources"];
    let resolver = template.resolver(&production(), names());
    let properties_of = |id: &str| properties(template, &resolver, id);
    let dashboard = properties_of("Dashboard")?;
    ensure!(
        dashboard["DashboardName"].as_str().is_some_and(|n| n.contains(REGION)),
        "dashboards are global: {}",
        dashboard["DashboardName"]
    );
    let index = properties_of("IndexTable")?;
    ensure!(
        resources["IndexTable"]["DeletionPolicy"] == "Retain"
            && index["DeletionProtectionEnabled"] == true
            && index["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] == "true"
            && index["WarmThroughput"]["WriteUnitsPerSecond"] == "12000",
        "the index table: {index}"
    );
    // The archive bucket only where the stack archives.
    for (region, created) in [("", true), (REGION, true), ("eu-west-1", false)] {
        let resolver = template.resolver(&set(&[("ArchiveRegion", region)]), names());
        ensure!(
            resolver.resource_exists("ArchiveBucket")? == created,
            "ArchiveRegion {region:?}: archive bucket created {created}"
        );
    }
    // A stack name of 128 characters still names a valid workgroup (at most 128).
    let long = Names { stack: "s".repeat(128), ..names() };
    let queries = set(&[("ArchiveQueries", "true")]);
    let workgroup = template
        .resolver(&queries, long)
        .resolve(&resources["ArchiveWorkGroup"]["Properties"]["Name"], "workgroup")?
        .context("a name")?;
    ensure!(workgroup.as_str().is_some_and(|n| (1..=128).contains(&n.len())), "{workgroup}");
    // Free text is checked before it reaches JSON, filter patterns, Glue types and Athena SQL.
    for name in [
        "TtlAttribute",
        "IndexedAttribute",
        "MetricsNamespace",
        "IndexTableName",
        "ArchiveBucketName",
        "ArchivePrefix",
        "IndexVerifySchedule",
    ] {
        let pattern = template.root()["Parameters"][name]["AllowedPattern"]
            .as_str()
            .with_context(|| format!("{name} has no AllowedPattern"))?;
        let pattern = regex_lite::Regex::new(pattern)?;
        for bad in ["a\"b", "a\\b", "a}b", "a b'", "a,b\n"] {
            ensure!(!pattern.is_match(bad), "{name} admits {bad:?}");
        }
    }
    Ok(())
}

/// `KmsKeyArn`, one customer managed key, on every store the stack creates (tables, buckets,
/// Kinesis streams, the alarm topic, log groups), and every function's role may use it through
/// DynamoDB, S3 and Kinesis only.
#[test]
fn one_key_covers_every_store() -> Result<()> {
    let template = template()?;
    let resolver = template.resolver(&production(), names());
    // Every store the stack creates, under the one key.
    let mut keyed_stores = 0;
    for (kind, pointer) in [
        ("AWS::DynamoDB::Table", "/SSESpecification/KMSMasterKeyId"),
        (
            "AWS::S3::Bucket",
            "/BucketEncryption/ServerSideEncryptionConfiguration/0/ServerSideEncryptionByDefault/KMSMasterKeyID",
        ),
        ("AWS::Kinesis::Stream", "/StreamEncryption/KeyId"),
        ("AWS::SNS::Topic", "/KmsMasterKeyId"),
        ("AWS::Logs::LogGroup", "/KmsKeyId"),
    ] {
        for (id, p) in resolver.resolved(kind)? {
            ensure!(p.pointer(pointer) == Some(&Value::from(KEY)), "{id}: not under KmsKeyArn: {p}");
            keyed_stores += 1;
        }
    }
    ensure!(keyed_stores >= 15, "stores checked: {keyed_stores}");
    // Each function's role may use it, through the stores' services only.
    for (role, statements) in role_statements(template, &resolver)? {
        if [
            "BackfillStateMachineRole",
            "VerifyStateMachineRole",
            "RestoreStateMachineRole",
            "PreTrafficHookRole",
            "CodeDeployRole",
        ]
        .contains(&role)
        {
            continue;
        }
        let uses = statements.iter().find(|s| s["Sid"] == "UseStackKey");
        let via = uses.map(|s| strings(&s["Condition"]["StringEquals"]["kms:ViaService"]));
        ensure!(
            via.is_some_and(
                |v| v.len() == 3 && v.iter().all(|s| s.ends_with(&format!(".{REGION}.amazonaws.com")))
            ),
            "{role}: the stack's key through DynamoDB, S3 and Kinesis only: {uses:?}"
        );
    }
    Ok(())
}

/// Deploys that can be rolled back: every stream mapping invokes its function's `live` alias,
/// which `CodeDeploy` moves only after the pre-traffic hook passed the new version; the hook is
/// named so that SAM's `CodeDeploy` role may invoke it, and may itself invoke only the stream
/// functions' versions.
#[test]
fn stream_functions_deploy_through_a_gate() -> Result<()> {
    let template = template()?;
    let resources = &template.root()["Resources"];
    let mut gated = 0;
    for (deployment, parameters) in deployable() {
        let resolver = template.resolver(&parameters, names());
        for function in template.functions(&resolver)? {
            if function.streams.is_empty() {
                continue;
            }
            let p = &resources[&function.logical_id]["Properties"];
            ensure!(
                p["AutoPublishAlias"] == "live"
                    && p["DeploymentPreference"]["Hooks"]["PreTraffic"]
                        == serde_json::json!({"Ref": "PreTrafficHook"}),
                "{deployment}: {} deploys through the gate",
                function.logical_id
            );
            gated += 1;
        }
        let hook =
            resolver.resolve(&resources["PreTrafficHook"]["Properties"], "hook")?.context("the hook")?;
        let name = hook["FunctionName"].as_str().context("a name")?;
        ensure!(name.starts_with("CodeDeployHook_") && name.len() <= 64, "{name}");
        let (_, statements) = role_statements(template, &resolver)?
            .into_iter()
            .find(|(r, _)| *r == "PreTrafficHookRole")
            .context("the hook's role")?;
        let invoke =
            statements.iter().find(|s| s["Sid"] == "InvokeNewVersions").context("its invoke statement")?;
        let streams: BTreeSet<String> = template
            .functions(&resolver)?
            .iter()
            .filter(|f| !f.streams.is_empty())
            .map(|f| format!("arn:aws:lambda:{REGION}:{ACCOUNT}:function:{}:*", physical(&f.logical_id)))
            .collect();
        ensure!(
            strings(&invoke["Resource"]).into_iter().collect::<BTreeSet<_>>() == streams,
            "{deployment}: the hook invokes {:?}, not the stream functions' versions {streams:?}",
            invoke["Resource"]
        );
    }
    ensure!(gated > 40, "gated functions checked: {gated}");
    Ok(())
}

/// What a reviewer and a deployer read: every parameter in exactly one console group; the
/// Outputs the runbooks name, each where its resource is; and samconfig.toml's environments,
/// each naming only parameters that exist, with values they admit, passing the Rules.
#[test]
fn the_template_reads_as_its_deployers_need() -> Result<()> {
    let template = template()?;
    let root = template.root();
    let mut grouped: BTreeMap<String, usize> = BTreeMap::new();
    let groups = root
        .pointer("/Metadata/AWS::CloudFormation::Interface/ParameterGroups")
        .and_then(Value::as_array)
        .context("parameter groups")?;
    for group in groups {
        for name in strings(&group["Parameters"]) {
            *grouped.entry(name).or_default() += 1;
        }
    }
    let declared: BTreeSet<String> =
        root["Parameters"].as_object().context("parameters")?.keys().cloned().collect();
    ensure!(
        grouped.keys().cloned().collect::<BTreeSet<_>>() == declared && grouped.values().all(|n| *n == 1),
        "every parameter in exactly one group: {grouped:?}"
    );
    for (output, resource) in [
        ("IndexerFunction", "IndexerFunction"),
        ("IndexerMapping", "IndexerFunction"),
        ("ArchiverFunction", "ArchiverFunction"),
        ("ArchiverMapping", "ArchiverFunction"),
        ("IssuesStreamFunction", "IssuesStreamFunction"),
        ("IssuesStreamMapping", "IssuesStreamFunction"),
        ("AggregatorFunction", "AggregatorFunction"),
        ("AggregatorMapping", "AggregatorFunction"),
        ("VerifierFunction", "VerifierFunction"),
        ("BackfillFunction", "BackfillFunction"),
        ("GridApiCursorSecret", "GridApiCursorSecret"),
    ] {
        ensure!(
            root["Outputs"][output]["Condition"] == root["Resources"][resource]["Condition"],
            "the output {output} exists where {resource} does"
        );
    }
    let samconfig = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../samconfig.toml"))?;
    let mut environments = 0;
    for section in samconfig.split("parameter_overrides = [").skip(1) {
        let list = section.split(']').next().unwrap_or_default();
        let mut parameters = BTreeMap::new();
        for pair in list.lines().map(str::trim).filter(|l| l.starts_with('"')) {
            let pair = pair.trim_end_matches(',').trim_matches('"');
            let (name, value) = pair.split_once('=').context("NAME=value")?;
            let declaration = &root["Parameters"][name];
            ensure!(declaration.is_object(), "samconfig.toml names no parameter {name}");
            admits(name, declaration, value).context("in samconfig.toml")?;
            parameters.insert(name.to_owned(), value.to_owned());
        }
        let broken = template.resolver(&parameters, names()).broken_rules()?;
        ensure!(broken.is_empty(), "samconfig.toml {parameters:?}: {broken:?}");
        environments += 1;
    }
    ensure!(environments == 2, "production and demo: {environments}");
    Ok(())
}

/// Each stream function's alarms, written once in deploy/stream-consumer-alarms.yaml, exist for
/// every stream function of every deployment: errors and lag on the function, a stopped mapping
/// and records given up on its mapping, and parked records and systemic failures for each member
/// (a combined function's two, the archiver's only where it archives).
#[test]
fn every_stream_function_has_its_alarms() -> Result<()> {
    let template = template()?;
    let mut checked = 0;
    for (deployment, parameters) in deployable() {
        let resolver = template.resolver(&parameters, names());
        for function in template.functions(&resolver)? {
            let Some(prefix) = function.logical_id.strip_suffix("Function") else {
                continue;
            };
            if function.streams.is_empty() {
                continue;
            }
            let name = physical(&function.logical_id);
            let archives = function.environment.contains_key("ARCHIVE_BUCKET");
            let members: Vec<String> = match function.binary.as_deref() {
                Some(COMBINED) if archives => {
                    vec![format!("{name}/multikey-indexer"), format!("{name}/ttl-archiver")]
                }
                Some(COMBINED) => vec![format!("{name}/multikey-indexer")],
                _ => vec![name.clone()],
            };
            let mut expected =
                vec![("ErrorsAlarm".to_owned(), name.clone()), ("IteratorAgeAlarm".to_owned(), name.clone())];
            for (member, which) in members.iter().zip(["", "Second"]) {
                expected.push((format!("{which}ParkedRecordsAlarm"), member.clone()));
                expected.push((format!("{which}SystemicFailuresAlarm"), member.clone()));
            }
            for (alarm, dimension) in expected {
                let id = format!("{prefix}{alarm}");
                ensure!(resolver.resource_exists(&id)?, "{deployment}: no {id}");
                let p = properties(template, &resolver, &id)?;
                ensure!(
                    p["Dimensions"][0]["Value"] == dimension.as_str(),
                    "{deployment}: {id} watches {}, not {dimension}",
                    p["Dimensions"][0]["Value"]
                );
                checked += 1;
            }
            let second = format!("{prefix}SecondParkedRecordsAlarm");
            ensure!(
                resolver.resource_exists(&second)? == (members.len() == 2),
                "{deployment}: {second} only for a second member"
            );
            // The mapping SAM makes of the function's stream event, as this resolver names it.
            let mapping = physical(&format!("{}{}", function.logical_id, function.streams[0].name));
            for alarm in ["MappingStoppedAlarm", "DroppedEventsAlarm"] {
                let id = format!("{prefix}{alarm}");
                let p = properties(template, &resolver, &id)?;
                ensure!(
                    p.to_string().contains(&format!("\"{mapping}\"")),
                    "{deployment}: {id} watches the mapping {mapping}: {p}"
                );
                checked += 1;
            }
        }
    }
    ensure!(checked > 200, "alarms checked: {checked}");
    Ok(())
}

/// The registry of stream functions (`sidestream_combined::FUNCTIONS`), which the CLI, the
/// status, the replay and the local stack read, names each function as the template deploys it:
/// its logical id runs its binary, and the combined function's runs `sidestream-combined`.
#[test]
fn the_registry_names_each_function_as_the_template_deploys_it() -> Result<()> {
    let template = template()?;
    let mut checked = BTreeSet::new();
    for (deployment, parameters) in deployments() {
        let functions = template.functions(&template.resolver(&parameters, names()))?;
        let registry = sidestream_combined::FUNCTIONS
            .iter()
            .map(|f| (f.logical_id, f.name))
            .chain([(sidestream_combined::COMBINED_LOGICAL_ID, sidestream_combined::COMBINED_BINARY)]);
        for (logical_id, binary) in registry {
            if let Some(function) = functions.iter().find(|f| f.logical_id == logical_id) {
                ensure!(
                    function.binary.as_deref() == Some(binary),
                    "{deployment}: {logical_id} runs {:?}, the registry says {binary}",
                    function.binary
                );
                checked.insert(logical_id);
            }
        }
        for function in &functions {
            let Some(binary) = function.binary.as_deref() else {
                continue;
            };
            if stream_functions().contains(&binary) {
                ensure!(
                    sidestream_combined::Function::named(binary)
                        .is_some_and(|f| f.logical_id == function.logical_id),
                    "{deployment}: {} runs {binary}, which the registry deploys under another logical id",
                    function.logical_id
                );
            }
        }
    }
    // Every entry was deployed by some deployment: none is checked by its absence.
    ensure!(checked.len() == sidestream_combined::FUNCTIONS.len() + 1, "{checked:?}");
    Ok(())
}

/// With `GridApi=true` the grid API is reached through its function URL with IAM authentication
/// only (no other permission lets anyone invoke it), signs cursors with the stack's own secret
/// (generated, never the development key), has a reserved concurrency and both its alarms;
/// without it, none of that exists.
#[test]
fn the_grid_api_is_reached_only_with_iam_and_signs_with_its_own_secret() -> Result<()> {
    let template = template()?;
    let resources = &template.root()["Resources"];
    let on = template.resolver(&set(&[("GridApi", "true")]), names());
    let function = properties(template, &on, "GridApiFunction")?;
    ensure!(
        function["FunctionUrlConfig"] == serde_json::json!({"AuthType": "AWS_IAM"}),
        "{}",
        function["FunctionUrlConfig"]
    );
    ensure!(number_of(&function["ReservedConcurrentExecutions"])? >= 1, "a reserved concurrency");
    for permission in template.resources_of_type("AWS::Lambda::Permission") {
        let text = resources[permission].to_string();
        ensure!(!text.contains("GridApiFunction"), "{permission} lets someone invoke the grid API: {text}");
    }
    let secret = properties(template, &on, "GridApiCursorSecret")?;
    let length = secret["GenerateSecretString"]["PasswordLength"].as_u64().unwrap_or(0);
    ensure!(
        usize::try_from(length)? >= operations::grid_api::MIN_KEY_BYTES
            && secret.get("SecretString").is_none(),
        "a generated key of at least {} characters: {secret}",
        operations::grid_api::MIN_KEY_BYTES
    );
    let secret_ref = on.string(&serde_json::json!({"Ref": "GridApiCursorSecret"}), "GridApiCursorSecret")?;
    ensure!(function["Environment"]["Variables"]["GRID_CURSOR_SECRET"] == secret_ref.as_str(), "{function}");
    for alarm in ["GridApiErrorsAlarm", "GridApiServerErrorsAlarm"] {
        ensure!(on.resource_exists(alarm)?, "{alarm}");
    }
    // A function URL answers a throttle 429, a 4xx: an alarm on its 5xx alone does not see
    // throttles, and must not say it does.
    let server_errors = properties(template, &on, "GridApiServerErrorsAlarm")?;
    let watched: Vec<&str> =
        alarm_metrics(&server_errors).into_iter().filter_map(|m| m["MetricName"].as_str()).collect();
    let description = server_errors["AlarmDescription"].as_str().unwrap_or_default();
    ensure!(
        watched.contains(&"Throttles") || description.contains("429"),
        "{watched:?} counts no throttle, but the description reads {description:?}"
    );
    ensure!(
        template.root()["Outputs"]["GridApiUrl"]["Value"]
            == serde_json::json!({"Fn::GetAtt": ["GridApiFunctionUrl", "FunctionUrl"]})
    );
    let off = template.resolver(&set(&[]), names());
    for id in [
        "GridApiFunction",
        "GridApiRole",
        "GridApiCursorSecret",
        "GridApiErrorsAlarm",
        "GridApiServerErrorsAlarm",
    ] {
        ensure!(!off.resource_exists(id)?, "{id} exists without GridApi");
    }
    Ok(())
}

/// The verify and restore jobs read state objects that may not be written yet. Without
/// `s3:ListBucket` on the bucket, S3 answers a missing key 403 `AccessDenied`, not 404
/// `NoSuchKey` (S3 API reference, `GetObject`, "Permissions"), so each job's role may list its
/// own bucket, unconditioned: an `s3:prefix` condition does not apply to a `GetObject`.
#[test]
fn the_jobs_may_list_their_buckets_so_that_a_missing_key_is_not_found() -> Result<()> {
    let template = template()?;
    let parameters = set(&[("IndexVerifySchedule", "rate(1 day)"), ("EnableArchiveRestore", "true")]);
    let resolver = template.resolver(&parameters, names());
    let roles = role_statements(template, &resolver)?;
    for (role, bucket) in [("VerifierRole", "VerifyBucket"), ("RestoreRole", "RestoreBucket")] {
        let (_, statements) = roles.iter().find(|(r, _)| *r == role).with_context(|| format!("no {role}"))?;
        let arn = format!("arn:aws:s3:::{}", physical(bucket));
        let lists = statements.iter().any(|s| {
            s["Effect"] == "Allow"
                && strings(&s["Action"]).iter().any(|a| a == "s3:ListBucket")
                && strings(&s["Resource"]).contains(&arn)
                && s.get("Condition").is_none()
        });
        ensure!(
            lists,
            "{role} may not list {arn} unconditioned: a missing key would be 403: {statements:#?}"
        );
    }
    Ok(())
}

/// Actions the Service Authorization Reference gives no resource type: a statement naming an ARN
/// grants nothing for them, so every role that has one has it on "*" alone.
const NO_RESOURCE_TYPE: [&str; 6] = [
    "codedeploy:GetDeploymentTarget",
    "codedeploy:ListDeploymentTargets",
    "codedeploy:PutLifecycleEventHookExecutionStatus",
    "cloudwatch:GetMetricStatistics",
    "dynamodb:ListStreams",
    "logs:CreateLogDelivery",
];

#[test]
fn actions_without_a_resource_type_are_granted_on_every_resource() -> Result<()> {
    let template = template()?;
    let mut all = deployable();
    all.push((
        "every optional part on",
        set(&[
            ("EnableBackfill", "true"),
            ("IndexVerifySchedule", "rate(1 day)"),
            ("EnableArchiveRestore", "true"),
            ("GridApi", "true"),
        ]),
    ));
    let mut seen = BTreeSet::new();
    for (deployment, parameters) in all {
        let resolver = template.resolver(&parameters, names());
        for (role, statements) in role_statements(template, &resolver)? {
            for statement in statements {
                for action in strings(&statement["Action"]) {
                    if NO_RESOURCE_TYPE.contains(&action.as_str()) {
                        ensure!(
                            strings(&statement["Resource"]) == ["*"],
                            "{deployment}: {role} {}: {action} on {} grants nothing",
                            statement["Sid"],
                            statement["Resource"]
                        );
                        seen.insert(action);
                    }
                }
            }
        }
    }
    ensure!(seen.len() == NO_RESOURCE_TYPE.len(), "checked {seen:?}");
    Ok(())
}

/// Every state of a definition, those of its maps' processors included, by name.
fn all_states(definition: &Value, out: &mut Vec<(String, Value)>) {
    for (name, state) in definition["States"].as_object().into_iter().flatten() {
        out.push((name.clone(), state.clone()));
        all_states(&state["ItemProcessor"], out);
    }
}

/// An invocation that crashed, timed out or was killed for memory surfaces in a Task as
/// `Lambda.Unknown` (or `Lambda.ClientExecutionTimeoutException`), not as a service exception
/// (Step Functions developer guide, bp-lambda-serviceexception): every Lambda task of the three
/// state machines retries both, a few times and not at once.
#[test]
fn every_lambda_task_retries_a_crashed_invocation() -> Result<()> {
    let template = template()?;
    let parameters = jobs_on();
    let resolver = template.resolver(&parameters, names());
    let mut tasks = 0;
    for machine in ["BackfillStateMachine", "VerifyStateMachine", "RestoreStateMachine"] {
        let mut states = Vec::new();
        all_states(&properties(template, &resolver, machine)?["Definition"], &mut states);
        for (name, state) in states {
            if state["Type"] != "Task" {
                continue;
            }
            let retriers = state["Retry"].as_array().cloned().unwrap_or_default();
            for error in ["Lambda.Unknown", "Lambda.ClientExecutionTimeoutException"] {
                let retrier = retriers
                    .iter()
                    .find(|r| strings(&r["ErrorEquals"]).iter().any(|e| e == error))
                    .with_context(|| format!("{machine} {name}: {error} is not retried: {retriers:?}"))?;
                let attempts = retrier["MaxAttempts"].as_i64().unwrap_or(3);
                let interval = retrier["IntervalSeconds"].as_i64().unwrap_or(1);
                ensure!(
                    (2..=5).contains(&attempts) && interval >= 5,
                    "{machine} {name}: {error} retried {attempts} times, {interval} s apart"
                );
            }
            tasks += 1;
        }
    }
    ensure!(tasks == 8, "Lambda tasks checked: {tasks}");
    Ok(())
}

/// The interval of a `rate(N unit)` schedule, in seconds.
fn rate_seconds(expression: &str) -> Result<u64> {
    let inner = expression
        .strip_prefix("rate(")
        .and_then(|e| e.strip_suffix(')'))
        .with_context(|| format!("not a rate: {expression}"))?;
    let (count, unit) = inner.split_once(' ').context("rate(N unit)")?;
    let unit = match unit.trim_end_matches('s') {
        "minute" => 60,
        "hour" => 3_600,
        "day" => 86_400,
        other => bail!("a rate in {other}"),
    };
    Ok(count.parse::<u64>()? * unit)
}

/// samconfig.toml's production environment verifies its 50M items as docs/scaling.md sizes the
/// job (its table of `IndexVerifySegments`, `IndexVerifyConcurrency` and
/// `IndexVerifyReadUnitsPerSegment`), a run fits well inside the verify job's cut, and the cut
/// comes before the next scheduled run, so that two runs never overlap; a cut run is alarmed.
#[test]
fn production_verifies_its_table_within_its_period_and_runs_never_overlap() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let samconfig = std::fs::read_to_string(root.join("samconfig.toml"))?;
    let production =
        samconfig.split("[production.deploy.parameters]").nth(1).context("a production environment")?;
    let list = production
        .split("parameter_overrides = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .context("its parameter_overrides")?;
    let mut parameters = BTreeMap::new();
    for pair in list.lines().map(str::trim).filter(|l| l.starts_with('"')) {
        let (name, value) =
            pair.trim_end_matches(',').trim_matches('"').split_once('=').context("NAME=value")?;
        parameters.insert(name.to_owned(), value.to_owned());
    }
    let scaling = std::fs::read_to_string(root.join("docs/scaling.md"))?;
    let section = scaling.split("## index verify").nth(1).context("scaling.md's index verify")?;
    let mut sized = BTreeMap::new();
    for name in ["IndexVerifySegments", "IndexVerifyConcurrency", "IndexVerifyReadUnitsPerSegment"] {
        let row = section
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .with_context(|| format!("scaling.md sizes no {name}"))?;
        let documented = row.split('|').nth(2).unwrap_or_default().trim().replace(',', "");
        ensure!(
            parameters.get(name) == Some(&documented),
            "production's {name} is {:?}, scaling.md's {documented}",
            parameters.get(name)
        );
        sized.insert(name, documented.parse::<u64>()?);
    }
    // scaling.md counts 500 million read units for 50 million items (10 an item); each segment
    // spends its share at its units a second, the segments in waves of IndexVerifyConcurrency.
    let (segments, concurrency, units) = (
        sized["IndexVerifySegments"],
        sized["IndexVerifyConcurrency"],
        sized["IndexVerifyReadUnitsPerSegment"],
    );
    let run = segments.div_ceil(concurrency) * (500_000_000 / segments) / units;
    let template = template()?;
    let resolver = template.resolver(&parameters, names());
    let machine = properties(template, &resolver, "VerifyStateMachine")?;
    let cut = u64::try_from(number_of(&machine["Definition"]["TimeoutSeconds"])?)?;
    let schedule = parameters.get("IndexVerifySchedule").context("production verifies on a schedule")?;
    let interval = rate_seconds(schedule)?;
    ensure!(cut < interval, "a run is cut at {cut} s, after the next one starts ({schedule})");
    ensure!(run * 2 < cut, "a 50M-item run takes about {run} s, too near the {cut} s cut");
    // A run cut at TimeoutSeconds is ExecutionsTimedOut, not ExecutionsFailed: its alarm reads both.
    let alarm = properties(template, &resolver, "VerifyExecutionsFailedAlarm")?;
    let watched: Vec<&str> =
        alarm_metrics(&alarm).into_iter().filter_map(|m| m["MetricName"].as_str()).collect();
    ensure!(
        watched.contains(&"ExecutionsFailed") && watched.contains(&"ExecutionsTimedOut"),
        "VerifyExecutionsFailedAlarm watches {watched:?}"
    );
    Ok(())
}

/// Schedule names are unique within a schedule group, and SAM names a `ScheduleV2` event after
/// its logical id unless told otherwise: the verify schedule is named by `CloudFormation`
/// (`OmitName`) or after the stack, so that a second stack in the account and Region deploys.
#[test]
fn the_verify_schedule_is_named_per_stack() -> Result<()> {
    let template = template()?;
    let schedule = &template.root()["Resources"]["VerifyStateMachine"]["Properties"]["Events"]["Schedule"];
    let given = &schedule["Properties"];
    ensure!(schedule["Type"] == "ScheduleV2", "{schedule}");
    ensure!(
        given["OmitName"] == true || given["Name"].to_string().contains("AWS::Stack"),
        "two stacks' schedules would share a name: {given}"
    );
    Ok(())
}

/// Every log group a state machine logs to is under `/aws/vendedlogs/`: Step Functions' log
/// delivery adds any other to the account's `CloudWatch` Logs resource policy, which is capped
/// at 5,120 characters (Step Functions developer guide, bp-cwl).
#[test]
fn state_machines_log_under_vendedlogs() -> Result<()> {
    let template = template()?;
    let parameters = jobs_on();
    let resolver = template.resolver(&parameters, names());
    let mut checked = 0;
    for machine in template.resources_of_type("AWS::Serverless::StateMachine") {
        let logging = &template.root()["Resources"][machine]["Properties"]["Logging"];
        for destination in logging["Destinations"].as_array().into_iter().flatten() {
            let group = destination
                .pointer("/CloudWatchLogsLogGroup/LogGroupArn/Fn::GetAtt/0")
                .and_then(Value::as_str)
                .context("LogGroupArn: !GetAtt <log group>.Arn expected")?;
            let name = properties(template, &resolver, group)?["LogGroupName"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            ensure!(name.starts_with("/aws/vendedlogs/"), "{machine} logs to {name}");
            checked += 1;
        }
    }
    ensure!(checked == 3, "state machines' log groups checked: {checked}");
    Ok(())
}

/// Every bucket outlives the stack (`Retain` on delete and on replacement), the verify and
/// restore jobs' too: `CloudFormation` cannot delete a bucket that still holds objects, and a
/// retained bucket's lifecycle empties it.
#[test]
fn every_bucket_outlives_the_stack() -> Result<()> {
    let template = template()?;
    let resources = &template.root()["Resources"];
    let buckets = template.resources_of_type("AWS::S3::Bucket");
    for bucket in &buckets {
        let resource = &resources[*bucket];
        ensure!(
            resource["DeletionPolicy"] == "Retain" && resource["UpdateReplacePolicy"] == "Retain",
            "{bucket}: DeletionPolicy {}, UpdateReplacePolicy {}",
            resource["DeletionPolicy"],
            resource["UpdateReplacePolicy"]
        );
    }
    ensure!(buckets.len() >= 4, "buckets checked: {buckets:?}");
    // Retained, the jobs' buckets must not keep the parts of an upload a dead run left.
    for bucket in ["VerifyBucket", "RestoreBucket"] {
        let rules = &resources[bucket]["Properties"]["LifecycleConfiguration"]["Rules"];
        ensure!(
            rules
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 1),
            "{bucket}: incomplete uploads are aborted after a day: {rules}"
        );
    }
    Ok(())
}

/// `CodeDeploy` deploys the stream functions with the stack's own role, not the one SAM would make
/// with `AWSCodeDeployRoleForLambda`: it may move only their `live` aliases, invoke only the hook,
/// read the account's alarms, and nothing else (no `sns:Publish`, nothing on "*").
#[test]
fn codedeploy_deploys_with_a_role_of_its_own() -> Result<()> {
    let template = template()?;
    let resources = &template.root()["Resources"];
    let role = serde_json::json!({"Fn::GetAtt": ["CodeDeployRole", "Arn"]});
    let trust = &resources["CodeDeployRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0];
    ensure!(trust["Principal"]["Service"] == "codedeploy.amazonaws.com", "{trust}");
    let hook = format!("arn:aws:lambda:{REGION}:{ACCOUNT}:function:{}", physical("PreTrafficHook"));
    let alarms = format!("arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:*");
    for (deployment, parameters) in deployable() {
        let resolver = template.resolver(&parameters, names());
        let mut arns = BTreeSet::new();
        for function in template.functions(&resolver)? {
            if function.streams.is_empty() {
                continue;
            }
            let preference = &resources[&function.logical_id]["Properties"]["DeploymentPreference"];
            ensure!(
                preference["Role"] == role,
                "{deployment}: {} deploys with SAM's role",
                function.logical_id
            );
            arns.insert(format!(
                "arn:aws:lambda:{REGION}:{ACCOUNT}:function:{}",
                physical(&function.logical_id)
            ));
        }
        let (_, statements) = role_statements(template, &resolver)?
            .into_iter()
            .find(|(r, _)| *r == "CodeDeployRole")
            .context("the CodeDeploy role")?;
        let mut granted = BTreeSet::new();
        for statement in &statements {
            let on: BTreeSet<String> = strings(&statement["Resource"]).into_iter().collect();
            for action in strings(&statement["Action"]) {
                let expected: BTreeSet<String> = match action.as_str() {
                    "lambda:GetAlias" | "lambda:UpdateAlias" => arns.clone(),
                    "lambda:GetProvisionedConcurrencyConfig" => {
                        arns.iter().map(|a| format!("{a}:live")).collect()
                    }
                    "lambda:InvokeFunction" => BTreeSet::from([hook.clone()]),
                    "cloudwatch:DescribeAlarms" => BTreeSet::from([alarms.clone()]),
                    other => bail!(
                        "{deployment}: CodeDeployRole may {other}, which a Lambda deployment does not need"
                    ),
                };
                ensure!(on == expected, "{deployment}: {action} on {on:?}, not {expected:?}");
                granted.insert(action);
            }
        }
        ensure!(granted.len() == 5 && !arns.is_empty(), "{deployment}: {granted:?} for {arns:?}");
    }
    Ok(())
}

/// A new stack does not page for a verification that has not run yet: `IndexVerifyMissingAlarm`
/// treats the hours between runs as missing, not breaching (`INSUFFICIENT_DATA` until one
/// reports, and again when none has for its hours), notifies that change to its topic as it
/// notifies `ALARM` and `OK`, and its runbook says what each state means.
#[test]
fn a_new_stack_does_not_page_for_a_verification_not_run_yet() -> Result<()> {
    let template = template()?;
    let resolver = template.resolver(&set(&[("IndexVerifySchedule", "rate(1 day)")]), names());
    let p = properties(template, &resolver, "IndexVerifyMissingAlarm")?;
    ensure!(
        p["TreatMissingData"] == "missing",
        "missing data as {}: a new stack would page",
        p["TreatMissingData"]
    );
    ensure!(
        p["AlarmActions"].as_array().is_some_and(|a| !a.is_empty())
            && p["InsufficientDataActions"] == p["AlarmActions"],
        "a stopped schedule (OK to INSUFFICIENT_DATA) must notify: {p}"
    );
    let runbook =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md"))?;
    let section = runbook
        .split("### Runbook: index verify missing")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .context("docs/operations.md's runbook for IndexVerifyMissingAlarm")?;
    ensure!(
        section.contains("INSUFFICIENT_DATA") && section.contains("ALARM"),
        "the runbook says nothing of INSUFFICIENT_DATA: {section}"
    );
    Ok(())
}

/// docs/grid-view.md's policy for the grid API's callers (the JSON block after
/// `<!-- caller-policy -->`) allows both actions a function URL with `AWS_IAM` needs since
/// October 2025: `lambda:InvokeFunctionUrl`, and `lambda:InvokeFunction` conditioned on
/// `lambda:InvokedViaFunctionUrl` (Lambda developer guide, urls-auth).
#[test]
fn the_grid_api_callers_policy_allows_both_invoke_actions() -> Result<()> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/grid-view.md"))?;
    let block = doc
        .split("<!-- caller-policy -->")
        .nth(1)
        .and_then(|rest| rest.split("```json").nth(1))
        .and_then(|rest| rest.split("```").next())
        .context("docs/grid-view.md has no caller policy after <!-- caller-policy -->")?;
    let policy: Value = serde_json::from_str(block)?;
    let statements = policy["Statement"].as_array().context("statements")?;
    let allows = |action: &str| {
        statements
            .iter()
            .find(|s| s["Effect"] == "Allow" && strings(&s["Action"]).iter().any(|a| a == action))
    };
    ensure!(allows("lambda:InvokeFunctionUrl").is_some(), "no lambda:InvokeFunctionUrl: {policy:#}");
    let invoke = allows("lambda:InvokeFunction").context("no lambda:InvokeFunction")?;
    ensure!(
        invoke["Condition"]["Bool"]["lambda:InvokedViaFunctionUrl"] == "true",
        "lambda:InvokeFunction without lambda:InvokedViaFunctionUrl: {invoke:#}"
    );
    Ok(())
}

/// The `GridNullsIndex` output (what `sidestream grid --stack` reads) names the index the grid
/// API reads and may query: the parameter on a team's table, `project-num` on the table the stack
/// creates, whatever the parameter says, in every deployment.
#[test]
fn the_grid_nulls_index_output_is_the_index_the_grid_reads() -> Result<()> {
    let template = template()?;
    let mut checked = 0;
    for (deployment, mut parameters) in deployments() {
        parameters.insert("GridNullsIndex".into(), "byTeam".into());
        let resolver = template.resolver(&parameters, names());
        let output = resolver.resolve(&template.root()["Outputs"]["GridNullsIndex"]["Value"], "Outputs")?;
        let expected = if parameters.contains_key("IssuesTableStreamArn") { "byTeam" } else { "project-num" };
        ensure!(
            output == Some(Value::from(expected)),
            "{deployment}: the output is {output:?}, not {expected}"
        );
        checked += 1;
    }
    ensure!(checked > 5, "{checked} deployments");
    Ok(())
}

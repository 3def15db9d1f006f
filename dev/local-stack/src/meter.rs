//! What the emulator's meter billed (scripts/meter.py, which states AWS's rules): DynamoDB's
//! request units per table and requests per operation, and S3's requests by bucket and class,
//! since the emulator started: a reader takes the difference of two readings.

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use serde::{Deserialize, Serialize};

use crate::StackError;

/// The meter's totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metered {
    /// DynamoDB (and DynamoDB Streams, counted, not billed).
    pub dynamodb: DynamoDb,
    /// S3 requests by bucket, then by class: `put_copy_post_list`, `get_and_other`, `free`
    /// (deletes).
    #[serde(default)]
    pub s3: BTreeMap<String, BTreeMap<String, u64>>,
}

/// DynamoDB's part.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DynamoDb {
    /// Units by table name.
    #[serde(default)]
    pub tables: BTreeMap<String, Units>,
    /// Requests by operation (`PutItem`, `GetRecords`, …).
    #[serde(default)]
    pub requests: BTreeMap<String, u64>,
}

/// One table's units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Units {
    /// Write request units billed.
    #[serde(default)]
    pub wru: f64,
    /// What the same item writes cost as single unconditional writes (refused ones and condition
    /// checks nothing).
    #[serde(default)]
    pub wru_single: f64,
    /// Read request units billed.
    #[serde(default)]
    pub rru: f64,
    /// Writes refused by their condition (billed all the same).
    #[serde(default)]
    pub refused: f64,
}

impl Metered {
    /// Write units billed over every table.
    pub fn wru(&self) -> f64 {
        self.dynamodb.tables.values().map(|u| u.wru).sum()
    }

    /// Read units billed over every table.
    pub fn rru(&self) -> f64 {
        self.dynamodb.tables.values().map(|u| u.rru).sum()
    }

    /// DynamoDB requests, stream reads left out (free to Lambda).
    pub fn dynamodb_requests(&self) -> u64 {
        self.dynamodb.requests.iter().filter(|(op, _)| !is_stream_read(op)).map(|(_, n)| n).sum()
    }

    /// S3 requests of `class`, over every bucket.
    pub fn s3(&self, class: &str) -> u64 {
        self.s3.values().filter_map(|classes| classes.get(class)).sum()
    }

    /// The totals of several emulators (a chaos run splits its tables over two).
    pub fn add(&mut self, other: &Metered) {
        self.combine(other, 1.0);
    }

    /// What was billed after `before` was read (the meter counts up; other clients of the same
    /// emulator share it, so a reader takes differences rather than resetting it).
    #[must_use]
    pub fn since(&self, before: &Metered) -> Metered {
        let mut out = self.clone();
        out.combine(before, -1.0);
        out
    }

    /// The tables and buckets whose names start with `prefix` (a stack's), requests aside: those
    /// are counted by operation, not by table.
    #[must_use]
    pub fn only(&self, prefix: &str) -> Metered {
        Metered {
            dynamodb: DynamoDb {
                tables: self
                    .dynamodb
                    .tables
                    .iter()
                    .filter(|(t, _)| t.starts_with(prefix))
                    .map(|(t, u)| (t.clone(), *u))
                    .collect(),
                requests: self.dynamodb.requests.clone(),
            },
            s3: self
                .s3
                .iter()
                .filter(|(b, _)| b.starts_with(prefix))
                .map(|(b, c)| (b.clone(), c.clone()))
                .collect(),
        }
    }

    fn combine(&mut self, other: &Metered, sign: f64) {
        for (table, u) in &other.dynamodb.tables {
            let mine = self.dynamodb.tables.entry(table.clone()).or_default();
            mine.wru += sign * u.wru;
            mine.wru_single += sign * u.wru_single;
            mine.rru += sign * u.rru;
            mine.refused += sign * u.refused;
        }
        let add =
            |mine: &mut u64, n: u64| *mine = if sign > 0.0 { *mine + n } else { mine.saturating_sub(n) };
        for (op, n) in &other.dynamodb.requests {
            add(self.dynamodb.requests.entry(op.clone()).or_default(), *n);
        }
        for (bucket, classes) in &other.s3 {
            let mine = self.s3.entry(bucket.clone()).or_default();
            for (class, n) in classes {
                add(mine.entry(class.clone()).or_default(), *n);
            }
        }
    }
}

/// Whether a DynamoDB operation is a DynamoDB Streams one.
fn is_stream_read(operation: &str) -> bool {
    matches!(operation, "GetRecords" | "GetShardIterator" | "DescribeStream" | "ListStreams")
}

/// The meter's totals so far at the emulator `sdk` reaches.
pub async fn read(sdk: &SdkConfig) -> Result<Metered, StackError> {
    let endpoint =
        sdk.endpoint_url().ok_or_else(|| StackError::Unusable("no emulator endpoint to meter".into()))?;
    read_at(endpoint).await
}

/// [`read`] at the emulator at `endpoint`.
pub async fn read_at(endpoint: &str) -> Result<Metered, StackError> {
    let answer = crate::control_at(endpoint, "Meter", &serde_json::json!({})).await?;
    serde_json::from_value(answer.clone())
        .map_err(|e| StackError::Unusable(format!("the emulator's meter answered {answer}: {e}")))
}

//! The archive's newest object, found by descending its layout: at each level of
//! `year=`/`month=`/`day=` folders only the greatest is opened (their numbers are zero-padded, so
//! the greatest name is the latest), every `table=` folder is opened, and `_meta/` is skipped.
//! A few listings, however large the archive.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::status::{StatusError, rfc3339};

/// The archive's newest object.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveStatus {
    /// `s3://<bucket>/<prefix>`.
    pub location: String,
    /// The newest object's key, if the archive holds any.
    pub newest: Option<String>,
    /// When it was written (RFC 3339).
    pub written_at: Option<String>,
    /// Its age, in seconds.
    pub age_seconds: Option<u64>,
}

/// Listings at most, so that a layout unlike the archive's cannot make this a whole listing.
const MAX_LISTINGS: usize = 200;

/// The newest object under `prefix` in `bucket`, at `now`.
pub(crate) async fn newest(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    now: SystemTime,
) -> Result<ArchiveStatus, StatusError> {
    let mut folders = vec![prefix.to_owned()];
    let mut newest: Option<(i64, String)> = None;
    let mut listings = 0;
    while let Some(folder) = folders.pop() {
        listings += 1;
        if listings > MAX_LISTINGS {
            break;
        }
        let (subfolders, objects) = list(client, bucket, &folder).await?;
        for (secs, key) in objects {
            if newest.as_ref().is_none_or(|(at, _)| secs > *at) {
                newest = Some((secs, key));
            }
        }
        let subfolders: Vec<String> =
            subfolders.into_iter().filter(|f| !f[folder.len()..].starts_with("_meta/")).collect();
        let dated = subfolders.iter().all(|f| {
            let name = &f[folder.len()..];
            ["year=", "month=", "day="].iter().any(|p| name.starts_with(p))
        });
        if dated {
            folders.extend(subfolders.into_iter().max());
        } else {
            folders.extend(subfolders);
        }
    }
    let age = newest.as_ref().map(|(secs, _)| {
        let written = UNIX_EPOCH + Duration::from_secs(u64::try_from(*secs).unwrap_or(0));
        now.duration_since(written).unwrap_or_default().as_secs()
    });
    Ok(ArchiveStatus {
        location: format!("s3://{bucket}/{prefix}"),
        written_at: newest
            .as_ref()
            .map(|(secs, _)| rfc3339(UNIX_EPOCH + Duration::from_secs(u64::try_from(*secs).unwrap_or(0)))),
        newest: newest.map(|(_, key)| key),
        age_seconds: age,
    })
}

/// One folder's subfolders and objects (with their last-modified seconds), every page.
async fn list(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    folder: &str,
) -> Result<(Vec<String>, Vec<(i64, String)>), StatusError> {
    let (mut folders, mut objects) = (Vec::new(), Vec::new());
    let mut pages =
        client.list_objects_v2().bucket(bucket).prefix(folder).delimiter("/").into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| {
            io_policy::RequestFailed::sdk("ListObjectsV2", format!("s3://{bucket}/{folder}"), &e)
        })?;
        folders.extend(page.common_prefixes().iter().filter_map(|p| p.prefix().map(str::to_owned)));
        objects.extend(
            page.contents().iter().filter_map(|o| Some((o.last_modified()?.secs(), o.key()?.to_owned()))),
        );
    }
    Ok((folders, objects))
}

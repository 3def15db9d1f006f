//! SigV4 checked as a Lambda function URL with `AuthType: AWS_IAM` checks it: the request's
//! `Authorization` header recomputed from its method, path, query, signed headers and payload
//! with the one key pair the local stack knows, for the service `lambda` in its Region. What is
//! refused says why. Independent of the SDK's signer (the tests check one against the other).

use std::time::{Duration, SystemTime};

use hmac::{Hmac, KeyInit as _, Mac as _};
use sha2::{Digest as _, Sha256};

/// How far a request's `x-amz-date` may be from now (AWS's window).
pub const SKEW: Duration = Duration::from_secs(15 * 60);

/// The credentials and scope requests must be signed with.
#[derive(Debug, Clone)]
pub struct Verifier {
    /// The access key id.
    pub access_key: String,
    /// Its secret.
    pub secret_key: String,
    /// The Region in the credential scope.
    pub region: String,
    /// The service in the credential scope (`lambda` for a function URL).
    pub service: String,
}

/// A request as it arrived: what a signature covers.
#[derive(Debug, Clone, Copy)]
pub struct Signed<'a> {
    /// The method.
    pub method: &'a str,
    /// The path, as sent.
    pub path: &'a str,
    /// The query string, as sent (without `?`).
    pub query: &'a str,
    /// Every header, names in any case.
    pub headers: &'a [(String, String)],
    /// The body.
    pub body: &'a [u8],
}

impl Verifier {
    /// Whether `request` is signed by this key pair for this Region and service, within
    /// [`SKEW`] of `now`; why not, in words.
    pub fn verify(&self, request: &Signed<'_>, now: SystemTime) -> Result<(), String> {
        let header = |name: &str| {
            request.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim())
        };
        let authorization =
            header("authorization").ok_or("no Authorization header: the request is not signed")?;
        let fields = authorization
            .strip_prefix("AWS4-HMAC-SHA256 ")
            .ok_or("the Authorization header is not AWS4-HMAC-SHA256")?;
        let field = |name: &str| {
            fields
                .split(',')
                .map(str::trim)
                .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
                .ok_or_else(|| format!("the Authorization header has no {name}"))
        };
        let (credential, signed_headers, signature) =
            (field("Credential")?, field("SignedHeaders")?, field("Signature")?);
        let mut scope = credential.splitn(5, '/');
        let (key, day, region, service, terminal) =
            (scope.next(), scope.next(), scope.next(), scope.next(), scope.next());
        if key != Some(self.access_key.as_str()) {
            return Err(format!("the access key {} is not known here", key.unwrap_or_default()));
        }
        if (region, service, terminal) != (Some(&*self.region), Some(&*self.service), Some("aws4_request")) {
            return Err(format!(
                "the credential scope {credential} is not for {}/{}/aws4_request",
                self.region, self.service
            ));
        }
        let date = header("x-amz-date").ok_or("no x-amz-date header")?;
        let at =
            parse_amz_date(date).ok_or_else(|| format!("x-amz-date {date:?} is not YYYYMMDDTHHMMSSZ"))?;
        let off = now.duration_since(at).unwrap_or_else(|e| e.duration());
        if off > SKEW {
            return Err(format!(
                "x-amz-date {date} is {} s from now, more than {} s",
                off.as_secs(),
                SKEW.as_secs()
            ));
        }
        if Some(&date[..8]) != day {
            return Err(format!(
                "the credential's day {} is not x-amz-date's {date}",
                day.unwrap_or_default()
            ));
        }
        let names: Vec<&str> = signed_headers.split(';').collect();
        if !names.contains(&"host") {
            return Err("the host header is not signed".to_owned());
        }
        let mut canonical_headers = String::new();
        for name in &names {
            let value =
                header(name).ok_or_else(|| format!("the signed header {name} is not in the request"))?;
            canonical_headers.push_str(name);
            canonical_headers.push(':');
            canonical_headers.push_str(&value.split_whitespace().collect::<Vec<_>>().join(" "));
            canonical_headers.push('\n');
        }
        let payload =
            header("x-amz-content-sha256").map_or_else(|| hex(&Sha256::digest(request.body)), str::to_owned);
        let canonical = format!(
            "{}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{payload}",
            request.method,
            canonical_path(request.path),
            canonical_query(request.query)
        );
        let scope = format!("{}/{}/{}/aws4_request", &date[..8], self.region, self.service);
        let to_sign =
            format!("AWS4-HMAC-SHA256\n{date}\n{scope}\n{}", hex(&Sha256::digest(canonical.as_bytes())));
        let mut signing = hmac(format!("AWS4{}", self.secret_key).as_bytes(), &date.as_bytes()[..8]);
        for part in [self.region.as_str(), self.service.as_str(), "aws4_request"] {
            signing = hmac(&signing, part.as_bytes());
        }
        let expected = hex(&hmac(&signing, to_sign.as_bytes()));
        if expected == signature {
            Ok(())
        } else {
            Err("the signature does not match the request (a different secret key, or a request changed after signing)".to_owned())
        }
    }
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// The encoding of RFC 3986, as SigV4 wants it: unreserved characters as they are, everything else
/// `%XX` in upper case.
fn encode(text: &str, keep_slash: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) || (keep_slash && byte == b'/') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Percent-decoding (a `+` is a space, as forms send it).
fn decode(text: &str) -> String {
    form_urlencoded::parse(format!("x={text}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// The path, each segment decoded and encoded again (services other than S3 encode twice; a
/// function URL's paths here have nothing to encode).
fn canonical_path(path: &str) -> String {
    if path.is_empty() {
        return "/".to_owned();
    }
    let decoded: Vec<String> = path.split('/').map(decode).collect();
    encode(&encode(&decoded.join("/"), true), true)
}

/// The query's parameters decoded, encoded again and sorted by name, then value.
fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (encode(&decode(name), false), encode(&decode(value), false))
        })
        .collect();
    pairs.sort();
    pairs.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join("&")
}

/// `YYYYMMDDTHHMMSSZ` as a time.
fn parse_amz_date(text: &str) -> Option<SystemTime> {
    let at = chrono::NaiveDateTime::parse_from_str(text, "%Y%m%dT%H%M%SZ").ok()?.and_utc();
    let seconds = u64::try_from(at.timestamp()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests;

//! The check against AWS's own SigV4 example and against the SDK's signer: what either signs is
//! accepted, and a change to any signed part, another key, an old date or no signature refused.

use std::time::{Duration, SystemTime};

use super::*;

/// AWS's SigV4 test suite, `get-vanilla`: `GET /` to `example.amazonaws.com` at
/// 2015-08-30T12:36:00Z, key `AKIDEXAMPLE`, service `service`, Region `us-east-1`.
#[test]
fn awss_own_example_is_accepted() {
    let verifier = Verifier {
        access_key: "AKIDEXAMPLE".into(),
        secret_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
        region: "us-east-1".into(),
        service: "service".into(),
    };
    let headers = vec![
        ("Host".to_owned(), "example.amazonaws.com".to_owned()),
        ("X-Amz-Date".to_owned(), "20150830T123600Z".to_owned()),
        (
            "Authorization".to_owned(),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, \
             Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
                .to_owned(),
        ),
    ];
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160);
    let request = Signed { method: "GET", path: "/", query: "", headers: &headers, body: b"" };
    assert_eq!(verifier.verify(&request, at), Ok(()));
}

fn verifier() -> Verifier {
    Verifier {
        access_key: "AKIDLOCAL".into(),
        secret_key: "local-secret".into(),
        region: "us-east-1".into(),
        service: "lambda".into(),
    }
}

/// `GET http://127.0.0.1:9001{path_and_query}` signed by the SDK's signer (`aws-sigv4`) with
/// `secret`, at `at`: the request's headers.
fn sdk_signed(path_and_query: &str, secret: &str, at: SystemTime) -> Vec<(String, String)> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    let identity = aws_credential_types::Credentials::new("AKIDLOCAL", secret, None, None, "test").into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("lambda")
        .time(at)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let url = format!("http://127.0.0.1:9001{path_and_query}");
    let host = [("host", "127.0.0.1:9001")];
    let request = SignableRequest::new("GET", url, host.into_iter(), SignableBody::Bytes(b"")).unwrap();
    let (instructions, _) = sign(request, &params).unwrap().into_parts();
    let mut headers = vec![("host".to_owned(), "127.0.0.1:9001".to_owned())];
    headers.extend(instructions.headers().map(|(n, v)| (n.to_owned(), v.to_owned())));
    headers
}

#[test]
fn what_the_sdk_signs_is_accepted_and_any_change_refused() {
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_867_200);
    let query = "scope=35e9&field=3fe6&limit=4&cursor=g1.eyJrIjp7In0.tag-_~";
    let headers = sdk_signed(&format!("/api/page?{query}"), "local-secret", at);
    let request = Signed { method: "GET", path: "/api/page", query, headers: &headers, body: b"" };
    assert_eq!(verifier().verify(&request, at), Ok(()));
    assert_eq!(verifier().verify(&request, at + Duration::from_secs(600)), Ok(()), "within the skew");

    let refused = |request: &Signed<'_>, at: SystemTime, why: &str| {
        let error = verifier().verify(request, at).unwrap_err();
        assert!(error.contains(why), "{error}");
    };
    refused(
        &Signed { query: "scope=35e9&field=3fe6&limit=5&cursor=g1.eyJrIjp7In0.tag-_~", ..request },
        at,
        "does not match",
    );
    refused(&Signed { path: "/api/fields", ..request }, at, "does not match");
    refused(&Signed { method: "POST", ..request }, at, "does not match");
    refused(&request, at + Duration::from_secs(3600), "more than 900 s");
    let other = sdk_signed(&format!("/api/page?{query}"), "another-secret", at);
    refused(&Signed { headers: &other, ..request }, at, "does not match");
    let unsigned = vec![("host".to_owned(), "127.0.0.1:9001".to_owned())];
    refused(&Signed { headers: &unsigned, ..request }, at, "not signed");
    let elsewhere = Verifier { region: "eu-west-1".into(), ..verifier() };
    assert!(elsewhere.verify(&request, at).unwrap_err().contains("not for eu-west-1/lambda"));
    let stranger = Verifier { access_key: "AKIDOTHER".into(), ..verifier() };
    assert!(stranger.verify(&request, at).unwrap_err().contains("AKIDLOCAL is not known"));
}

/// The query is compared as SigV4 canonicalizes it: decoded, encoded again, sorted; a space
/// sent as `+` (a form) or `%20` is the same.
#[test]
fn the_query_is_canonical_whatever_its_order_and_encoding() {
    assert_eq!(canonical_query("b=2&a=1&a=0"), "a=0&a=1&b=2");
    assert_eq!(canonical_query("prefix=a+b&x=%7e"), "prefix=a%20b&x=~");
    assert_eq!(canonical_query("c=g1.x_y-z~&d=%2F"), "c=g1.x_y-z~&d=%2F");
    assert_eq!(canonical_query(""), "");
    assert_eq!(canonical_path("/api/page"), "/api/page");
    assert_eq!(canonical_path(""), "/");
}

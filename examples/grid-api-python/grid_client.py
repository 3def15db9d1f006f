"""Pages a scope of Sidestream's index (a project's issues) sorted by a custom field through the
stack's grid API, signing each request with SigV4 as botocore signs AWS requests, and prints each
row as one JSON line: the rows `sidestream grid --output json` prints, in the same order.

    python grid_client.py URL SCOPE FIELD [--desc] [--limit N]

URL is the stack's GridApiUrl output. Credentials and the Region come from the environment, as
for any AWS SDK (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION); the
caller needs lambda:InvokeFunctionUrl on the grid API function. Needs botocore only.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.session import Session


def signed_get(url, credentials, region):
    """GETs `url` signed for a Lambda function URL (service `lambda`); the JSON it answers."""
    request = AWSRequest(method="GET", url=url)
    SigV4Auth(credentials, "lambda", region).add_auth(request)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=dict(request.headers.items()))) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as error:
        # The API answers {"error": "..."} with the status that says which input was wrong.
        sys.exit(f"grid API: HTTP {error.code}: {error.read().decode()}")


def rows(base, scope, field, desc, limit, credentials, region):
    """Every row of the scope in the field's order, page after page, following the cursor."""
    cursor = None
    while True:
        query = {"scope": scope, "field": field, "limit": str(limit)}
        if desc:
            query["desc"] = "1"
        if cursor:
            query["cursor"] = cursor
        # RFC 3986 encoding, so that the query string sent is the one signed.
        encoded = urllib.parse.urlencode(query, safe="-_.~", quote_via=urllib.parse.quote)
        page = signed_get(f"{base.rstrip('/')}/api/page?{encoded}", credentials, region)
        yield from page["rows"]
        cursor = page.get("next")
        if not cursor:
            return


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("scope")
    parser.add_argument("field")
    parser.add_argument("--desc", action="store_true")
    parser.add_argument("--limit", type=int, default=25)
    args = parser.parse_args()
    credentials = Session().get_credentials()
    if credentials is None:
        sys.exit("grid API: no AWS credentials in the environment")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    for row in rows(args.url, args.scope, args.field, args.desc, args.limit, credentials, region):
        print(json.dumps(row))


if __name__ == "__main__":
    main()

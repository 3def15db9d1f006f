// Pages a scope of Sidestream's index (a project's issues) sorted by a custom field through the
// stack's grid API, signing each request with SigV4 (aws4fetch), and prints each row as one JSON
// line: the rows `sidestream grid --output json` prints, in the same order.
//
//   node dist/grid-client.js URL SCOPE FIELD [--desc] [--limit N]
//
// URL is the stack's GridApiUrl output. Credentials and the Region come from the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION); the caller needs
// lambda:InvokeFunctionUrl on the grid API function.

import { AwsClient } from "aws4fetch";

/** One page as the API answers it. */
interface Page {
  rows: unknown[];
  next: string | null;
}

/** Every row of the scope in the field's order, page after page, following the cursor. */
async function* rows(
  client: AwsClient,
  base: string,
  scope: string,
  field: string,
  desc: boolean,
  limit: number,
): AsyncGenerator<unknown> {
  let cursor: string | null = null;
  do {
    const url = new URL("api/page", base.endsWith("/") ? base : `${base}/`);
    url.searchParams.set("scope", scope);
    url.searchParams.set("field", field);
    url.searchParams.set("limit", String(limit));
    if (desc) url.searchParams.set("desc", "1");
    if (cursor) url.searchParams.set("cursor", cursor);
    // A function URL is signed for the service "lambda".
    const response = await client.fetch(url.toString());
    if (!response.ok) {
      // The API answers {"error": "..."} with the status that says which input was wrong.
      throw new Error(`grid API: HTTP ${response.status}: ${await response.text()}`);
    }
    const page = (await response.json()) as Page;
    yield* page.rows;
    cursor = page.next;
  } while (cursor);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const desc = args.includes("--desc");
  const at = args.indexOf("--limit");
  const limit = at >= 0 ? Number(args[at + 1]) : 25;
  const [base, scope, field] = args.filter((a, i) => !a.startsWith("--") && (at < 0 || i !== at + 1));
  if (!base || !scope || !field) {
    throw new Error("usage: grid-client URL SCOPE FIELD [--desc] [--limit N]");
  }
  const { AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION } = process.env;
  if (!AWS_ACCESS_KEY_ID || !AWS_SECRET_ACCESS_KEY) {
    throw new Error("grid API: no AWS credentials in the environment");
  }
  const client = new AwsClient({
    accessKeyId: AWS_ACCESS_KEY_ID,
    secretAccessKey: AWS_SECRET_ACCESS_KEY,
    sessionToken: AWS_SESSION_TOKEN,
    service: "lambda",
    region: AWS_REGION ?? "us-east-1",
    retries: 0,
  });
  for await (const row of rows(client, base, scope, field, desc, limit)) {
    console.log(JSON.stringify(row));
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});

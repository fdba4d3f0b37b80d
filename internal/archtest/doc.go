// Package archtest guards the import graph, which reads top-down: functions/* (wiring, the only
// code besides cmd/* that builds AWS clients) → one use-case package per Lambda (submit,
// governance, create, poll, notify, approve, webhook, reconcile, agents), none importing
// another → shared kernels (stage, approval, sellertask, breaker, httpapi) → adapters (ledger,
// registry, sfn, adcp, slack, secrets) → leaves (record, workflow, money, jsonnum,
// approvalcore, webhookauth, dynamoretry, dispatch, ctxwait). Only wiring imports the ledger; the use
// cases speak record. Lambdas never link CDK or test support, and only tests import the use
// cases' harnesses (approvaltest, stagetest). It has tests only.
package archtest

// Package stagepaths holds the workflow tests (test layer 2 in docs/ARCHITECTURE.md) with the real stage
// Lambdas: statemachine/mediabuy.asl.json runs in aws-local-stepfunctions 3.0.0
// (statemachine/harness/live.mjs), and every Task state invokes the real Go bootstrap of its
// function, built for this host and run as processes behind a Lambda runtime API, against the
// simulated seller and governance agents (internal/adcptest), which speak only AdCP 3.2 and
// refuse what 3.2 refuses (3.1 agents and the official SDK's 3.0 seller on the paths
// versions_test.go names), kumo's DynamoDB and Secrets Manager, and a fake Slack. Buys enter through the submit function behind an API Gateway v2
// front, approvers decide through the approve function from the Slack link, and the seller's
// signed webhooks reach the webhook function the same way; the functions' Step Functions calls
// (StartExecution, SendTaskSuccess/Failure) reach the harness.
//
// One test per path of the state machine asserts the states entered (the event log), the AdCP
// calls the agents recorded and the ledger as the read API shows it. The package has only
// tests; they need Node and the root node_modules and run when BUYFLOW_NODE_TESTS=1 (make test
// sets it).
package stagepaths

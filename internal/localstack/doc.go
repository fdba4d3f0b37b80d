// Package localstack runs the whole buyflow application on one machine with no AWS account and
// no Docker: kumo (an in-process AWS emulator) hosts DynamoDB, Secrets Manager, Step Functions,
// Lambda and the HTTP API; the real bootstrap binaries run as child processes against kumo's
// Lambda runtime API; simulated AdCP seller and governance agents and a fake Slack stand in for
// the outside world (or BUYFLOW_AGENTS names real agents).
//
// Everything is created from the same descriptions the CDK stack reads: internal/topology
// (functions, environment, routes), ledger.TableSchema and statemachine.Render.
//
// # kumo, as this package uses it
//
//   - kumo's Step Functions engine and its execute-api call Lambda at http://localhost:4566,
//     whatever address the server has. Start runs a reverse proxy on 127.0.0.1:4566 to kumo's
//     real address, so only one stack can run per machine at a time. The proxy turns an
//     invocation answer carrying X-Amz-Function-Error into HTTP 500, which kumo's engine then
//     reports as States.TaskFailed (kumo alone would treat a function error as success).
//   - Execute-api is virtual-hosted ({api}.execute-api.localhost), a name the Go resolver does
//     not know. Start serves the API on its own loopback port (Stack.APIURL) and forwards each
//     request to kumo with that Host.
//   - A bootstrap polls kumo at AWS_LAMBDA_RUNTIME_API=<addr>/_runtime/<function>; kumo hands one
//     invocation to each waiting poll, so Options.Instances processes per function give that much
//     concurrency. Start waits until every process has polled once before it returns.
//   - kumo's Secrets Manager writes under a read lock (GetSecretValue sets LastAccessedDate): the
//     functions' AWS calls go through the proxy, which serializes Secrets Manager calls, so that
//     a test binary built with -race (kumo runs in it) does not report kumo's race.
//   - kumo routes AWS REST calls by the SigV4 credential scope: the Lambda and API Gateway calls
//     here are signed with dummy credentials.
//
// # Invariants
//
//   - Every listener binds 127.0.0.1. Every child process runs in its own process group and gets
//     SIGKILL if this process dies (Linux Pdeathsig); Close stops them all and waits.
//   - Secrets (link-signing keys, agent bearer tokens) are random per stack and live only in
//     kumo's Secrets Manager and in memory.
package localstack

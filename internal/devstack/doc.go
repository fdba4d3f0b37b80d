// Package devstack runs the whole buyflow application on one machine with no AWS account and
// no Docker: kumo (an in-process AWS emulator) hosts DynamoDB, Secrets Manager, Lambda and the
// HTTP API; Step Functions is statemachine/harness/live.mjs (aws-local-stepfunctions on Node,
// with AWS's Retry/Catch by error name, declared timeouts and execution history); the real
// bootstrap binaries run as child processes against kumo's Lambda runtime API; simulated AdCP
// seller and governance agents and a fake Slack stand in for the outside world (or
// BUYFLOW_AGENTS names real agents). A schedule invokes the reconciliation sweep, as
// EventBridge Scheduler does on AWS.
//
// Everything is created from the same descriptions the CDK stack reads: internal/topology
// (functions, environment, routes), ledger.TableSchema and statemachine.Render.
//
// # kumo, as this package uses it
//
//   - kumo's execute-api calls Lambda at http://localhost:4566, whatever address the server
//     has. Start runs a reverse proxy on 127.0.0.1:4566 (Stack.EmulatorURL) to kumo's real
//     address, so only one stack can run per machine at a time. The proxy sends Step Functions
//     calls to the local engine and everything else to kumo; it turns an invocation answer
//     carrying X-Amz-Function-Error into HTTP 500 for kumo's API Gateway (which would otherwise
//     pass the error document on as a 200), but not for the Step Functions engine, which reads
//     the error name from it as AWS does. kumo's own Step Functions engine is not used: it
//     reports every Lambda error as States.TaskFailed (Retry on the function's error name never
//     matches), gives up on a call after 30 s and keeps a two-event history.
//   - Lambda: each process polls at <addr>/_runtime/<function>~<n>; the proxy strips the number
//     and so knows which process holds which invocation. A process that exits (crash, panic,
//     kill) is replaced by a new one, which starts cold, and the invocation it held fails at
//     once with Runtime.ExitError, as on Lambda. kumo can hand an invocation to the poll of a
//     process that has just died, before it sees the closed connection, and would then wait
//     for the function's timeout: the proxy keeps each poll to kumo open past its process's
//     connection, reads what kumo hands it, and sends an invocation no live process took to a
//     live one (Trace kind "redispatch"), answering the original with its result. An
//     invocation payload over 6 MB gets Lambda's 413, an HTTP API request body over 6 MB API
//     Gateway's 413 (kumo answers 500).
//   - Execute-api is virtual-hosted ({api}.execute-api.localhost), a name the Go resolver does
//     not know. Start serves the API on its own loopback port (Stack.APIURL) and forwards each
//     request to kumo with that Host. kumo breaks a tie between a route and a greedy one
//     ({proxy+}) at random; API Gateway picks the more specific route. Start therefore also
//     creates a twin API without the greedy routes, and the front sends it every request a
//     more specific route matches.
//   - A bootstrap polls kumo through the proxy (above); kumo hands one
//     invocation to each waiting poll, so Options.Instances processes per function give that much
//     concurrency. Start waits until every process has polled once before it returns.
//   - The local Step Functions takes the function ARNs kumo hands out; its Lambda calls come
//     back through the proxy, which signs them (kumo routes REST calls by the SigV4 scope).
//   - kumo's Secrets Manager writes under a read lock (GetSecretValue sets LastAccessedDate): the
//     functions' AWS calls go through the proxy, which serializes Secrets Manager calls, so that
//     a test binary built with -race (kumo runs in it) does not report kumo's race.
//   - kumo routes AWS REST calls by the SigV4 credential scope: the Lambda and API Gateway calls
//     here are signed with dummy credentials.
//   - KMS, with Options.KMS, is a moto_server of the stack's own (internal/motoserver): the proxy
//     sends KMS calls (X-Amz-Target TrentService.*) there, and the functions sign with a key
//     created there as the CDK stack creates RequestSigningKey. Without it the functions sign
//     with a PEM file key and make no KMS call.
//   - No emulator enforces IAM. With Options.IAMTemplate (a template SynthTemplate made), the
//     proxy checks every call a function signs (its access key id names it) against that
//     function's role in the template and answers a refused one with AccessDeniedException, as
//     AWS does (iamgate.go); Stack.IAM keeps each decision. Not checked: the Step Functions
//     engine's own calls (the state machines' roles) and what the Lambda service does with a
//     function's role (logs, X-Ray, the stream's event source mapping).
//
// # Invariants
//
//   - Every listener binds 127.0.0.1. Every child process runs in its own process group and gets
//     SIGKILL if this process dies (Linux Pdeathsig); Close stops them all and waits.
//   - Secrets (link-signing keys, agent bearer tokens) are random per stack and live only in
//     kumo's Secrets Manager and in memory.
package devstack

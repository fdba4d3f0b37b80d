// Package e2e is buyflow's end-to-end suite (test layer 3 in docs/ARCHITECTURE.md): it drives a whole
// deployment through its HTTP API only — submit, read, list, the timeline, and the approval
// links a person would open from Slack.
//
// The endpoint comes from the environment:
//
//   - BUYFLOW_E2E_ENDPOINT unset: TestMain builds every functions/* bootstrap for this host
//     (or takes them from BUYFLOW_E2E_BIN) and starts the local stack (internal/devstack):
//     kumo, the real bootstraps, the simulated seller and governance agents and a fake Slack.
//     The tenant is named in the dev-only header, so two tenants can be compared.
//   - BUYFLOW_E2E_ENDPOINT=<url>: a deployed stack (LocalStack via cdklocal, or AWS). Requests
//     are SigV4-signed (service execute-api) with the default AWS credentials; the tenant is
//     that identity's account. The agents must be the simulated ones (their per-request
//     scripts select behaviours); cases that need a second tenant or the Slack sink skip unless
//     BUYFLOW_E2E_SLACK_URL names a sink.
//
// The suite needs BUYFLOW_E2E=1 (make test sets it); without it every test skips. Set
// BUYFLOW_E2E_VERBOSE=1 to stream the functions' logs; otherwise they go to a file named on
// failure.
//
// Behaviours are chosen per request with the simulated agents' script tokens in
// media_buy.context.sim (see internal/adcptest): e.g. "async_complete,wh_drop_all".
package e2e

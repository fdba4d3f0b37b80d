// Package webhook receives AdCP seller webhooks (POST /v1/webhooks/adcp/{operation_id},
// API Gateway HTTP API v2): the use case behind functions/webhook.
//
// Order of a delivery, and what each step may store:
//
//  1. Refusals that need no key and store nothing: a method other than POST (405), a
//     Content-Type other than application/json (415), a body over 1 MB (413), measured on the
//     raw bytes (base64-decoded when API Gateway encoded them).
//  2. The operation's owner, its tenant and seller, comes from the URL's route when it opens
//     for the URL's operation (internal/webhookroute: sealed by the create or modify stage, no
//     table read), else it is found by id alone (Operations' LocateOperation: the operation
//     index; the path carries no tenant). An unknown or
//     malformed id is answered by a decoy RFC 9421 verifier whose key nobody holds, so the
//     401 is the one a seller's verifier would give and says nothing about which operations
//     exist. The operation itself is read here only when step 3 needs it (a Bearer credential;
//     an index item written before it named the seller); otherwise in step 4's round trip.
//  3. The operation's seller's verifier (RFC 9421, HMAC or Bearer, never a fallback) checks the
//     raw bytes against the exact target URI (BUYFLOW_PUBLIC_BASE_URL + the path from
//     /v1/webhooks/adcp/ when configured, else https://<domainName><rawPath>, plus ?rawQuery).
//     A failure is 401 with WWW-Authenticate: Signature error="<code>" and nothing stored (the
//     (keyid, nonce) pair is recorded only after every check passed: webhookauth's
//     VerifyDeferred, then Verified.Commit before any answer of steps 4 and 5, and a replay is
//     answered 401 webhook_signature_replayed whatever else the request would get).
//  4. The payload (core/mcp-webhook-payload.json) is parsed. A task update's receipt
//     (authenticated seller id = the operation's seller, idempotency_key, the payload's
//     canonical hash) is claimed with a conditional put before any side effect, in progress
//     until the effects are recorded (then done), while the nonce is recorded and the
//     operation read: requests on items of their own, so one round trip on the path a wake
//     waits for.
//  5. The delivery is correlated by what the signature covers: the URL path names the
//     operation; a body operation_id (3.1; 3.0 sellers leave it out) must equal it; the token
//     echo must hash to the operation's WebhookTokenHash (constant-time compare; 503 while the
//     create's answer, which records the hash, is not stored yet); task_id must be the
//     operation's seller task. A sync-… task id for an operation created synchronously (the
//     completion webhook a 3.0 seller sends after an inline answer) is acknowledged with 2xx
//     and an event, changing nothing. A refusal here, or in step 4, and a replay release the
//     receipt step 4 claimed: nothing stays stored but the transport nonce of an authentic
//     request. Every 4xx is counted in WebhookRejected (by Code, by Seller); every
//     authenticated 2xx in WebhookAccepted. A key already held is answered by
//     AdCP 3.2's retry rules: 503 delivery_in_progress while its first copy is being processed
//     (a claim older than receiptStale is taken over: its holder died), 200 duplicate once
//     done, and 409 idempotency_conflict for another payload under the key from a seller that
//     speaks only 3.2 or later (3.0 and 3.1 dedupe by the key alone: 200). Nothing else.
//     A delivery report (task_type media_buy_delivery, pushed to the buy's reporting_webhook)
//     may instead be authenticated by the Bearer credential that webhook registered: the
//     operation's token, checked against its hash; that credential authenticates nothing else.
//     It is correlated by the token alone (a reporting_webhook has no operation_id to echo, no
//     task) and recorded by Reports (the delivery reader: a snapshot when it moved): 200
//     "reported". It claims no receipt: the snapshot, one per (buy, as-of) by a conditional put
//     that carries the delivery's idempotency_key and payload hash, is its dedupe (a
//     redelivery writes nothing; one of the newest report is 200 "duplicate"), which saves a
//     report the receipt's two writes. The retry rules are a task update's: the newest
//     report's key with another payload is 409 idempotency_conflict from a seller that speaks
//     only 3.2, a duplicate otherwise; a new key for the same as-of is the seller's
//     correction, as an "adjusted" report is.
//  6. The update is applied forward only (workflow.FromTaskStatus; media_buy_id from the result
//     via adcp.DecodeMediaBuy), in one write conditioned on the operation exactly as it was
//     read (ledger.Advance: tried again from the item its refusal returns when another
//     writer came between). A transition the ledger refuses (an older or equal status) is
//     "stale" and leaves an audit event; a delivery about another task type, or a
//     status without lifecycle meaning, is "ignored" and leaves an audit event.
//  7. When the applied status needs the state machine (sellertask.WakeOutput(...).NeedsDecision()),
//     the parked token is completed with the wake output. For a terminal or input-required
//     status the write of step 6 took the token (one waker wins, and no request more); for a
//     lapsed deadline it is cleared first, conditionally. A gone token is fine; a failed wake is
//     logged: the ledger holds the truth and the wait's timeout polls it. The receipt is marked
//     done after the wake.
//  8. 200 {"outcome": "..."}; one structured log line per delivery (operationId, seller, status,
//     outcome, httpStatus, code). Tokens, signatures and bodies are never logged.
//
// Known limits: ordering is by the ledger's forward-only transition table, not yet by the
// seller's timestamp, so a late working after input-required (a legal move in both directions)
// is applied; the ledger would need the seller's last event time on the operation, compared in
// the transition's condition. After the receipt, a ledger failure is answered 5xx and the
// receipt is released, so the seller's retry applies the update; if the release fails too, the
// retry is taken for a duplicate and the wait's timeout poll recovers the update.
package webhook

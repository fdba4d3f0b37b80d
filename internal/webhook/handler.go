package webhook

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/internal/webhookauth"
	"github.com/buyflow/buyflow/internal/webhookroute"
)

// Outcome is what became of one delivery; it is logged and answered.
type Outcome string

// The outcomes of a delivery.
const (
	// OutcomeApplied: the update moved the operation forward.
	OutcomeApplied Outcome = "applied"
	// OutcomeDuplicate: a live receipt for (seller, idempotency_key) exists; nothing was done.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeStale: the ledger already holds this status or a newer one; an event records it.
	OutcomeStale Outcome = "stale"
	// OutcomeIgnored: an authenticated, deduplicated delivery that does not concern the
	// operation's lifecycle (another task type, a status without lifecycle meaning); an event
	// records it.
	OutcomeIgnored Outcome = "ignored"
	// OutcomeReported: a pushed delivery report (task_type media_buy_delivery) was recorded:
	// a snapshot when the delivery moved, nothing when it had not.
	OutcomeReported Outcome = "reported"
	// OutcomeAcknowledged: the completion webhook a 3.0 seller sends after a synchronous create
	// or update (task id sync-…, a task buyflow never saw); an event records it, nothing else
	// changes.
	OutcomeAcknowledged Outcome = "acknowledged"
	// outcomeRefused: the delivery was refused (4xx) and nothing was stored.
	outcomeRefused Outcome = "refused"
	// outcomeError: a dependency failed (5xx); the seller retries.
	outcomeError Outcome = "error"
)

// Answer is the body of a 2xx answer.
type Answer struct {
	Outcome Outcome `json:"outcome"`
}

// HandleHTTP answers POST /v1/webhooks/adcp/{operation_id} (API Gateway HTTP API, payload
// 2.0). The error is always nil: every answer, refusals included, is a response.
func (s *Service) HandleHTTP(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	r := s.handle(ctx, req)
	if r.refused {
		s.countRejected(r)
	}
	attrs := []any{"operationId", r.opID, "seller", r.seller, "status", r.status, "outcome", r.outcome, "httpStatus", r.resp.StatusCode}
	if r.code != "" {
		attrs = append(attrs, "code", r.code)
	}
	if r.err != nil {
		attrs = append(attrs, "err", r.err.Error())
		s.log.WarnContext(ctx, "webhook delivery", attrs...)
	} else {
		s.log.InfoContext(ctx, "webhook delivery", attrs...)
	}
	return r.resp, nil
}

// result is one handled delivery, for the answer and the log line.
type result struct {
	resp                 events.APIGatewayV2HTTPResponse
	opID, seller, status string
	outcome              Outcome
	code                 string
	err                  error // logged (never a token or a signature)
	refused              bool  // a 4xx: counted in WebhookRejected
}

func (r *result) refuse(status int, code, message string) result {
	r.resp, r.outcome, r.code = httpapi.Error(status, code, message, ""), outcomeRefused, code
	r.refused = true
	return *r
}

func (r *result) fail(code string, err error) result {
	return r.failWith(code, "the webhook could not be processed now; retry later", err)
}

func (r *result) failWith(code, message string, err error) result {
	r.resp = httpapi.Error(http.StatusServiceUnavailable, code, message, "")
	r.resp.Headers["Retry-After"] = "5"
	r.outcome, r.code, r.err = outcomeError, code, err
	return *r
}

func (r *result) ok(o Outcome) result {
	r.resp, r.outcome = httpapi.JSON(http.StatusOK, Answer{Outcome: o}), o
	return *r
}

func (s *Service) handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) result {
	r := &result{opID: operationIDOf(req)}
	if !ValidOperationID(r.opID) {
		r.opID = "" // never log what an anonymous caller put in the path
	}
	if m := req.RequestContext.HTTP.Method; m != "" && !strings.EqualFold(m, http.MethodPost) {
		out := r.refuse(http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
		out.resp.Headers["Allow"] = http.MethodPost
		return out
	}
	// Cheap refusals first, before any key is fetched or any signature is checked.
	if !httpapi.IsJSON(httpapi.Header(req, "Content-Type")) {
		return r.refuse(http.StatusUnsupportedMediaType, "unsupported_media_type", "webhooks must be application/json")
	}
	body, ok := rawBody(req)
	if !ok {
		return r.refuse(http.StatusRequestEntityTooLarge, "body_too_large", "webhook bodies are limited to 1 MB")
	}
	if body == nil {
		return r.refuse(http.StatusBadRequest, "body_malformed", "the body is not valid base64")
	}
	wreq := webhookauth.Request{Method: http.MethodPost, URL: s.targetURL(req), Header: headers(req), Body: body}

	owner, op, out := s.locate(ctx, r, req, wreq)
	if out != nil {
		return *out
	}
	r.seller = owner.SellerID
	// A delivery report may come authenticated by the Bearer credential of the buy's
	// reporting_webhook, which is the operation's own token (only its seller was given it):
	// checked against the operation's hash, constant-time. Anything else is verified the way
	// the seller's registry settings say; an RFC 9421 request's nonce is recorded below
	// (verified.Commit), before any answer but a 5xx of the verification or of the ledger's
	// first read.
	var verified webhookauth.Verified
	reportingBearer := s.reportingBearer(req, op)
	if !reportingBearer {
		v, err := s.verifier(ctx, owner.SellerID)
		if errors.Is(err, ErrSecretInvalid) {
			// Still a 503: once the operator fixes the secret, the seller's next retry is taken.
			// Counted, so that an operator learns it from an alarm, not from the seller.
			s.cfg.Metrics.Count(metrics.WebhookSecretInvalid, metrics.Dims{"Seller": owner.SellerID}, 1)
			s.cfg.Metrics.Count(metrics.WebhookSecretInvalid, nil, 1)
			return r.failWith("webhook_secret_invalid", "buyflow's webhook secret for this seller is misconfigured (its operator is told); retry later", err)
		}
		if err != nil {
			return r.fail("registry_unavailable", err)
		}
		if v == nil {
			return r.fail("seller_not_configured", errors.New("no webhook verifier for the operation's seller"))
		}
		if verified, err = v.VerifyDeferred(ctx, wreq); err != nil {
			return s.authFailure(r, err)
		}
	}

	d, report, refusal := s.parse(r, body, reportingBearer)
	if refusal == nil && report != nil {
		if op == nil {
			if op, out = s.read(ctx, r, owner); out != nil {
				return *out
			}
		}
		_, refusal = s.correlate(r, op, d, report)
	}
	if refusal != nil || report != nil {
		// The request is authentic: its nonce is recorded before it is answered, and a replay is
		// answered as one.
		if err := verified.Commit(ctx); err != nil {
			return s.authFailure(r, err)
		}
		if refusal != nil {
			return *refusal
		}
		// A delivery report needs no receipt: its snapshot is one (delivery.Reader.Push).
		s.accepted(ctx, op.SellerID)
		return s.recordReport(ctx, r, op, d, report)
	}
	// A task update. Its receipt is claimed before any side effect, so that a redelivery cannot
	// repeat one, while its nonce is recorded and the operation is read (requests on items of
	// their own, one round trip); its checks against the operation follow, and a refusal
	// releases the receipt it claimed.
	op, held, out := s.claim(ctx, r, owner, op, d, verified)
	if out != nil {
		return *out
	}
	syncEcho, refusal := s.correlate(r, op, d, nil)
	if refusal != nil {
		if held == nil {
			s.release(ctx, refusal, op.SellerID, d)
		}
		return *refusal
	}
	s.accepted(ctx, op.SellerID)
	if held != nil {
		return s.redelivery(ctx, r, op, d, held)
	}
	if syncEcho {
		s.event(ctx, op, record.Event{Type: record.EventWebhook, Actor: "seller:" + op.SellerID,
			Reason: "acknowledged: the completion of a synchronous " + syncTaskWord(op) + ", already recorded", Detail: deliveryDetail(d)})
		s.complete(ctx, r, op, d)
		return r.ok(OutcomeAcknowledged)
	}
	outcome, cur, token, err := s.apply(ctx, op, d)
	if err != nil {
		if rerr := s.cfg.Ledger.ReleaseReceipt(ctx, op.SellerID, d.IdempotencyKey); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return r.fail("ledger_unavailable", err)
	}
	// Wake first: the receipt's completion is bookkeeping for redeliveries, and the workflow
	// should not wait a table round trip for it. Were this instance to die between the two, a
	// redelivery meets an in-progress receipt (503) until it is stale, then applies the update
	// again, which the forward-only ledger takes as stale.
	if outcome == OutcomeApplied {
		if werr := s.wake(ctx, cur, token); werr != nil {
			// The ledger holds the update; the wait's timeout polls and finds it.
			r.err = werr
		}
	}
	s.complete(ctx, r, op, d)
	return r.ok(outcome)
}

// locate finds who owns the operation the URL names: from the URL's route when it opens
// (routed), else from the operation index. It reads the operation itself only where
// authenticating the request needs it: a reporting Bearer credential is checked against the
// operation's hash, and an index item written before it kept the seller does not say whose
// keys verify the signature. Otherwise a task update's operation is read while its receipt is
// claimed (claim). An unknown operation is answered as a 9421 seller's verifier would,
// revealing nothing.
func (s *Service) locate(ctx context.Context, r *result, req events.APIGatewayV2HTTPRequest, wreq webhookauth.Request) (record.OperationOwner, *record.Operation, *result) {
	if r.opID == "" {
		out := s.unknown(ctx, r, wreq)
		return record.OperationOwner{}, nil, &out
	}
	owner, routed := s.routed(ctx, req, r.opID)
	if !routed {
		var err error
		if owner, err = s.cfg.Operations.LocateOperation(ctx, r.opID); err != nil {
			out := s.lookupFailure(ctx, r, wreq, err)
			return owner, nil, &out
		}
	}
	if _, bearer := s.bearer(req); owner.SellerID != "" && !bearer {
		return owner, nil, nil
	}
	op, err := s.cfg.Operations.GetOperation(ctx, owner.Tenant, r.opID)
	if err != nil {
		out := s.lookupFailure(ctx, r, wreq, err)
		return owner, nil, &out
	}
	owner.SellerID = op.SellerID
	return owner, op, nil
}

// routed returns the owner the URL's route names, when it carries one that opens for the
// URL's operation: sealed by buyflow for it, so the owner it names is the operation's (the
// operation read under it confirms the seller). Otherwise (no route, a URL registered before
// routes, a route sealed under a replaced secret) the owner is found in the index.
func (s *Service) routed(ctx context.Context, req events.APIGatewayV2HTTPRequest, opID string) (record.OperationOwner, bool) {
	if s.cfg.Routes == nil || req.RawQueryString == "" {
		return record.OperationOwner{}, false
	}
	q, err := url.ParseQuery(req.RawQueryString)
	if err != nil {
		return record.OperationOwner{}, false
	}
	return s.cfg.Routes.Open(ctx, opID, q.Get(webhookroute.Param))
}

// lookupFailure answers a failed lookup of the operation the URL names: an unknown one as
// unknown does, a ledger failure 503.
func (s *Service) lookupFailure(ctx context.Context, r *result, wreq webhookauth.Request, err error) result {
	if errors.Is(err, record.ErrNotFound) {
		return s.unknown(ctx, r, wreq)
	}
	return r.fail("ledger_unavailable", err)
}

// unknown answers a delivery for an operation buyflow does not hold as a 9421 seller's
// verifier would, revealing nothing.
func (s *Service) unknown(ctx context.Context, r *result, wreq webhookauth.Request) result {
	_, err := s.decoy.Verify(ctx, wreq)
	if webhookauth.Code(err) == "" || errors.Is(err, webhookauth.ErrBodyMalformed) {
		err = webhookauth.ErrUnknownKey
	}
	return s.authFailure(r, err)
}

// read reads the operation owner says holds the URL's id.
func (s *Service) read(ctx context.Context, r *result, owner record.OperationOwner) (*record.Operation, *result) {
	op, err := s.cfg.Operations.GetOperation(ctx, owner.Tenant, r.opID)
	switch {
	case errors.Is(err, record.ErrNotFound):
		// The index and the operation are written together, and a route is sealed for an
		// operation that exists: this is a ledger fault.
		out := r.fail("ledger_unavailable", fmt.Errorf("webhook: tenant %s holds no operation %s", owner.Tenant, r.opID))
		return nil, &out
	case err != nil:
		out := r.fail("ledger_unavailable", err)
		return nil, &out
	case op.SellerID != owner.SellerID:
		out := r.fail("ledger_unavailable", fmt.Errorf("webhook: the operation's index or route names seller %q for %s, the operation %q", owner.SellerID, r.opID, op.SellerID))
		return nil, &out
	}
	return op, nil
}

// bearer returns the request's Bearer credential when pushed delivery reports are taken (only
// they may come so authenticated).
func (s *Service) bearer(req events.APIGatewayV2HTTPRequest) (string, bool) {
	if s.cfg.Reports == nil {
		return "", false
	}
	return strings.CutPrefix(httpapi.Header(req, "Authorization"), "Bearer ")
}

// reportingBearer reports whether req carries op's reporting credential (locate read op
// whenever req carries a Bearer one).
func (s *Service) reportingBearer(req events.APIGatewayV2HTTPRequest, op *record.Operation) bool {
	token, ok := s.bearer(req)
	return ok && op != nil && tokenMatches(token, op.WebhookTokenHash)
}

// parse reads an authenticated delivery. report is set for a pushed delivery report, which
// travels the task webhooks' route, token and checks but belongs to no task. refusal, when
// set, is the answer; nothing was stored.
func (s *Service) parse(r *result, body []byte, reportingBearer bool) (d *Delivery, report *adcp.DeliveryReport, refusal *result) {
	d, err := ParseDelivery(body)
	if err != nil {
		var de *DeliveryError
		errors.As(err, &de)
		out := r.refuse(http.StatusBadRequest, "invalid_payload", de.Error())
		return nil, nil, &out
	}
	r.status = d.Status
	if d.TaskType == taskTypeDelivery && s.cfg.Reports != nil {
		if report, err = adcp.DecodeDeliveryReport(d.Result); err != nil {
			out := r.refuse(http.StatusBadRequest, "invalid_payload", err.Error())
			return nil, nil, &out
		}
	}
	if reportingBearer && report == nil {
		// The reporting credential authenticates delivery reports only: a task update must
		// come as the seller's registered mode signs it.
		out := s.authFailure(r, webhookauth.ErrModeMismatch)
		return nil, nil, &out
	}
	return d, report, nil
}

// correlate checks a delivery against its operation by what the signature covers: the
// operation is the URL path's; a body operation_id (3.1) must agree, the token must echo the
// operation's, and the task must be the operation's (a report's task_id is the seller's
// reporting stream, and its reporting_webhook carries no operation_id for the seller to echo).
// refusal, when set, is the answer.
func (s *Service) correlate(r *result, op *record.Operation, d *Delivery, report *adcp.DeliveryReport) (syncEcho bool, refusal *result) {
	refuse := func(status int, code, message string) (bool, *result) {
		out := r.refuse(status, code, message)
		return false, &out
	}
	if d.OperationID != "" && d.OperationID != op.ID && report == nil {
		return refuse(http.StatusBadRequest, "operation_mismatch", "the payload's operation_id is not the one in the URL")
	}
	syncEcho = isSyncEcho(op, d)
	switch {
	case op.WebhookTokenHash == "" && !syncEcho:
		// The create registered a token, but its answer is not recorded yet (the seller was
		// quicker than the create stage): the echo cannot be checked now, so the seller retries.
		out := r.fail("operation_not_ready", errors.New("the operation's webhook token is not recorded yet"))
		return false, &out
	case op.WebhookTokenHash != "" && !tokenMatches(d.Token, op.WebhookTokenHash):
		return refuse(http.StatusForbidden, "token_mismatch", "the token does not echo the one registered for this operation")
	case report == nil && !syncEcho && op.SellerTaskID != "" && d.TaskID != op.SellerTaskID,
		report == nil && !syncEcho && op.SellerTaskID == "" && op.MediaBuyID != "":
		return refuse(http.StatusBadRequest, "task_mismatch", "the payload's task_id is not the operation's seller task")
	}
	return syncEcho, nil
}

// claim claims d's receipt (ClaimReceipt) while the request's nonce is recorded
// (verified.Commit) and, when op is nil, the operation is read: requests on items of their
// own, one round trip. It returns the operation and the receipt held, if any, when all went
// through; otherwise the answer, with a receipt this claim made released again, so that a
// replay stores nothing.
func (s *Service) claim(ctx context.Context, r *result, owner record.OperationOwner, op *record.Operation, d *Delivery, verified webhookauth.Verified) (*record.Operation, *record.Receipt, *result) {
	committed := goErr(func() error { return verified.Commit(ctx) })
	var readOut *result
	read := goErr(func() error {
		if op == nil {
			op, readOut = s.read(ctx, r, owner)
		}
		return nil
	})
	held, err := s.cfg.Ledger.ClaimReceipt(ctx, record.Receipt{SellerID: owner.SellerID, IdempotencyKey: d.IdempotencyKey,
		Tenant: owner.Tenant, OperationID: r.opID, TaskID: d.TaskID, ReceivedAt: s.now(), PayloadHash: d.PayloadHash}, receiptStale)
	cerr, rerr := <-committed, <-read
	var answer result
	switch {
	case cerr != nil:
		answer = s.authFailure(r, cerr)
	case rerr != nil:
		answer = r.fail("ledger_unavailable", rerr)
	case readOut != nil:
		answer = *readOut
	case err != nil:
		answer = r.fail("ledger_unavailable", err)
	default:
		return op, held, nil
	}
	if err == nil && held == nil {
		s.release(ctx, &answer, owner.SellerID, d)
	}
	return nil, nil, &answer
}

// goErr runs f on its own goroutine: its error, or its panic as one, arrives on the channel
// (a panic there would take the process down, out of the handler's recovery's reach).
func goErr(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("webhook: panic: %v", p)
			}
		}()
		done <- f()
	}()
	return done
}

// release deletes the receipt this delivery claimed, so that its retry is not taken for a
// duplicate. A failure is added to the answer's log line: the receipt is held in progress
// until receiptStale, and the seller's retry meanwhile is a 503.
func (s *Service) release(ctx context.Context, answer *result, sellerID string, d *Delivery) {
	if err := s.cfg.Ledger.ReleaseReceipt(ctx, sellerID, d.IdempotencyKey); err != nil {
		answer.err = errors.Join(answer.err, err)
	}
}

// taskTypeDelivery is the task type of a pushed delivery report.
const taskTypeDelivery = "media_buy_delivery"

// recordReport records a pushed delivery report. It claims no receipt: a report is recorded
// as a snapshot per (buy, as-of) by a conditional put that a redelivery cannot repeat, and a
// redelivery of the newest one is recognised by its idempotency key on that snapshot
// (delivery.Reader.Push), so the receipt's two writes a report would cost dedupe nothing more.
// A ledger failure is answered 5xx, and the seller's retry records what is not recorded yet; a
// report for an operation that delivers nothing (a change, a buy the seller has not placed) is
// "ignored" with an event; a canceled buy's reports are recorded (what it delivered is billed).
func (s *Service) recordReport(ctx context.Context, r *result, op *record.Operation, d *Delivery, report *adcp.DeliveryReport) result {
	_, prior, err := s.cfg.Reports.Push(ctx, op, report, d.IdempotencyKey, d.PayloadHash)
	switch {
	case errors.Is(err, record.ErrConflict):
		s.event(ctx, op, record.Event{Type: record.EventWebhook, Actor: "seller:" + op.SellerID,
			Reason: "ignored: a delivery report for an operation that delivers nothing", Detail: deliveryDetail(d)})
		return r.ok(OutcomeIgnored)
	case err != nil:
		return r.fail("ledger_unavailable", err)
	case prior != nil:
		// The retry rules of a task update's receipt: another payload under the key is a
		// conflict for a 3.2 seller, a duplicate otherwise.
		return s.redelivery(ctx, r, op, d, &record.Receipt{PayloadHash: prior.PushHash, Done: true})
	}
	return r.ok(OutcomeReported)
}

// receiptStale is how long a claimed delivery may stay in progress before a retry takes it
// over: three times the webhook function's 10 s timeout, so only a holder that died (a crash,
// a timeout) loses it, and a seller's retries (503 meanwhile) end in the update applied.
const receiptStale = 30 * time.Second

// redelivery answers a delivery whose idempotency_key is already held, by AdCP 3.2's retry
// rules: a different payload under the key is 409 from a seller that speaks only 3.2 or later
// (a 3.0 or 3.1 seller may re-serialise a retry, and those versions dedupe by the key alone);
// a delivery still being processed is 503, so the seller retries rather than take a 2xx for an
// update that may yet fail; one whose effects are recorded is 200, nothing done.
func (s *Service) redelivery(ctx context.Context, r *result, op *record.Operation, d *Delivery, held *record.Receipt) result {
	switch {
	case held.PayloadHash != "" && held.PayloadHash != d.PayloadHash && s.speaksOnly32(ctx, op.SellerID):
		s.cfg.Metrics.Count(metrics.WebhookDuplicates, metrics.Dims{"Kind": "conflict"}, 1)
		return r.refuse(http.StatusConflict, "idempotency_conflict",
			"this idempotency_key was delivered with a different payload; a changed payload needs a fresh key")
	case !held.Done:
		out := r.fail("delivery_in_progress", nil)
		out.resp = httpapi.Error(http.StatusServiceUnavailable, "delivery_in_progress",
			"this delivery is still being processed; retry it unchanged", "")
		out.resp.Headers["Retry-After"] = "2"
		return out
	}
	s.cfg.Metrics.Count(metrics.WebhookDuplicates, nil, 1)
	return r.ok(OutcomeDuplicate)
}

// complete marks the delivery's receipt done. A failure is logged, not answered: the update is
// recorded, and a retry meets an in-progress receipt (503) until it is stale, then applies the
// delivery again, which the forward-only ledger takes as stale.
func (s *Service) complete(ctx context.Context, r *result, op *record.Operation, d *Delivery) {
	if err := s.cfg.Ledger.CompleteReceipt(ctx, op.SellerID, d.IdempotencyKey); err != nil {
		r.err = errors.Join(r.err, err)
	}
}

// speaksOnly32 reports whether the registry lists the seller as speaking AdCP 3.2 or later
// and nothing older. Without a registry, or when it cannot say, the seller is read the 3.1 way.
func (s *Service) speaksOnly32(ctx context.Context, sellerID string) bool {
	if s.cfg.Registry == nil {
		return false
	}
	rec, err := s.cfg.Registry.Lookup(ctx, sellerID)
	if err != nil || rec.Capabilities == nil || len(rec.Capabilities.SupportedVersions) == 0 {
		return false
	}
	for _, v := range rec.Capabilities.SupportedVersions {
		if major, minor, ok := versionOf(v); !ok || major < 3 || major == 3 && minor < 2 {
			return false
		}
	}
	return true
}

// versionOf reads the major and minor of an AdCP version ("3.2", "3.2.3", "3.3-rc.0").
func versionOf(v string) (major, minor int, ok bool) {
	ma, rest, found := strings.Cut(v, ".")
	if !found {
		return 0, 0, false
	}
	mi := strings.FieldsFunc(rest, func(r rune) bool { return r == '.' || r == '-' })
	if len(mi) == 0 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(ma)
	minor, err2 := strconv.Atoi(mi[0])
	return major, minor, err1 == nil && err2 == nil
}

// authFailure answers a verification error: 401 with WWW-Authenticate for a verdict on the
// request (counted in WebhookSignatureFailures by its code and once with no dimension, unknown
// operations included), 413/400
// for the body, 503 when keys or the replay store are unavailable.
func (s *Service) authFailure(r *result, err error) result {
	code := webhookauth.Code(err)
	switch {
	case errors.Is(err, webhookauth.ErrBodyTooLarge):
		return r.refuse(http.StatusRequestEntityTooLarge, "body_too_large", "webhook bodies are limited to 1 MB")
	case errors.Is(err, webhookauth.ErrBodyMalformed):
		return r.refuse(http.StatusBadRequest, code, "the body must be one JSON object without duplicate keys")
	case code == "":
		return r.fail("verification_unavailable", err)
	}
	s.cfg.Metrics.Count(metrics.WebhookSignatureFailures, metrics.Dims{"Code": code}, 1)
	// Also with no dimension: the series the alarm reads (an alarm needs one exact dimension
	// set, and Code varies).
	s.cfg.Metrics.Count(metrics.WebhookSignatureFailures, nil, 1)
	out := r.refuse(http.StatusUnauthorized, code, "the webhook signature was not accepted")
	out.resp.Headers["WWW-Authenticate"] = webhookauth.WWWAuthenticate(err)
	return out
}

// accepted counts an authenticated, correlated delivery in WebhookAccepted by seller: the
// per-seller alarm fires when a seller's deliveries are refused and none is accepted.
func (s *Service) accepted(ctx context.Context, sellerID string) {
	s.cfg.Metrics.Count(metrics.WebhookAccepted, metrics.Dims{"Seller": sellerID}, 1)
}

// countRejected counts a refused delivery in WebhookRejected: by Code, by Seller when the
// operation is known (the per-seller alarm compares it with WebhookAccepted), and once with
// no dimension.
func (s *Service) countRejected(r result) {
	s.cfg.Metrics.Count(metrics.WebhookRejected, metrics.Dims{"Code": r.code}, 1)
	if r.seller != "" {
		s.cfg.Metrics.Count(metrics.WebhookRejected, metrics.Dims{"Seller": r.seller}, 1)
	}
	s.cfg.Metrics.Count(metrics.WebhookRejected, nil, 1)
}

// syncTaskWord names the task a synchronous echo completes, by the operation it reached: a
// change to a placed buy was sent as update_media_buy, a buy as create_media_buy. The
// operation, not the payload's task_type, says it: the timeline must not repeat a seller's
// mislabel.
func syncTaskWord(op *record.Operation) string {
	if op.Kind == record.KindModification {
		return "update"
	}
	return "create"
}

// isSyncEcho reports whether d is the completion webhook a 3.0 seller sends after a
// synchronous create or update: a sync-… task id for an operation whose call was answered inline
// (no seller task). It is acknowledged and changes nothing: the create's answer already did.
func isSyncEcho(op *record.Operation, d *Delivery) bool {
	return op.SellerTaskID == "" && strings.HasPrefix(d.TaskID, syncTaskPrefix)
}

// operationIDOf returns the {operation_id} path parameter, or the last segment of the path.
func operationIDOf(req events.APIGatewayV2HTTPRequest) string {
	if id := req.PathParameters["operation_id"]; id != "" {
		return id
	}
	p := req.RawPath
	return p[strings.LastIndexByte(p, '/')+1:]
}

// rawBody returns the exact bytes the seller sent (base64-decoded when API Gateway encoded
// them). ok is false when they exceed webhookauth.MaxBodyBytes; a nil body with ok means the
// base64 is invalid.
func rawBody(req events.APIGatewayV2HTTPRequest) (body []byte, ok bool) {
	if !req.IsBase64Encoded {
		if len(req.Body) > webhookauth.MaxBodyBytes {
			return nil, false
		}
		return []byte(req.Body), true
	}
	if base64.StdEncoding.DecodedLen(len(req.Body)) > webhookauth.MaxBodyBytes+3 {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, true
	}
	if len(b) > webhookauth.MaxBodyBytes {
		return nil, false
	}
	return b, true
}

// headers converts API Gateway's (lower-cased, comma-joined) headers to an http.Header.
func headers(req events.APIGatewayV2HTTPRequest) http.Header {
	h := make(http.Header, len(req.Headers))
	for k, v := range req.Headers {
		h.Set(k, v)
	}
	return h
}

// targetURL rebuilds the absolute URL the seller posted to, which its signature covers.
func (s *Service) targetURL(req events.APIGatewayV2HTTPRequest) string {
	path := req.RawPath
	if path == "" {
		path = req.RequestContext.HTTP.Path
	}
	// The $default stage is served at the root; some emulators still prefix it.
	if rest, ok := strings.CutPrefix(path, "/$default/"); ok && req.RequestContext.Stage == "$default" {
		path = "/" + rest
	}
	var u string
	if i := strings.Index(path, topology.WebhookPathPrefix); s.cfg.PublicBaseURL != "" && i >= 0 {
		u = s.cfg.PublicBaseURL + path[i:]
	} else {
		host := req.RequestContext.DomainName
		if host == "" {
			host = httpapi.Header(req, "Host")
		}
		u = "https://" + host + path
	}
	if req.RawQueryString != "" {
		u += "?" + req.RawQueryString
	}
	return u
}

// verifier returns the operation's seller's verifier, nil when it has none.
func (s *Service) verifier(ctx context.Context, sellerID string) (Verifier, error) {
	if s.cfg.Sellers == nil {
		return s.cfg.Verifiers[sellerID], nil
	}
	v, err := s.cfg.Sellers.Verifier(ctx, sellerID)
	if errors.Is(err, adcp.ErrUnknownAgent) {
		return nil, nil
	}
	return v, err
}

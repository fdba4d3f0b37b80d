package approve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/workflow"
)

// tasks completes parked Step Functions tasks; *sfn.Client satisfies it. A token that is gone
// is reported as an error matching sfn.ErrTaskGone.
type tasks interface {
	Succeed(ctx context.Context, token string, output any) error
	Fail(ctx context.Context, token, errName, cause string) error
}

// Service is the approve Lambda's use case: the confirm page, the decision and the approver
// routes (HandleHTTP). It is safe for concurrent use.
type Service struct {
	*approval.Base
	// tasks completes the parked RequestApproval token.
	tasks tasks
	// devTenantHeader, on the local stack only, names the header the approver routes take the
	// tenant from (with X-Buyflow-Principal for the principal), as the buyer routes do.
	devTenantHeader string
}

// New checks cfg and returns the approve Lambda's use case; tasks completes the parked
// RequestApproval token after a decision. devTenantHeader is set on the local stack only.
func New(cfg approval.Config, tasks tasks, devTenantHeader string) (*Service, error) {
	errs := cfg.Problems()
	if tasks == nil {
		errs = append(errs, errors.New("no task completer"))
	}
	s, err := approval.NewBase(cfg, errs)
	if err != nil {
		return nil, err
	}
	return &Service{Base: s, tasks: tasks, devTenantHeader: devTenantHeader}, nil
}

// rejectedErrorName is the SendTaskFailure error of a rejection: the Go type name of
// workflow.ApprovalRejectedError, which the state machine's Catch matches.
var rejectedErrorName = reflect.TypeOf(workflow.ApprovalRejectedError{}).Name()

// client is where a request came from, for the audit trail.
type client struct{ IP, UserAgent string }

func clientOf(req events.APIGatewayV2HTTPRequest) client {
	ua := req.RequestContext.HTTP.UserAgent
	if ua == "" {
		ua = httpapi.Header(req, "User-Agent")
	}
	return client{IP: req.RequestContext.HTTP.SourceIP, UserAgent: record.Clip(ua, 512)}
}

// HandleHTTP answers GET and POST /v1/approvals/{approval_id} (API Gateway HTTP API v2). GET
// verifies the signed link and shows the confirm page or the truth; it decides nothing (it only
// appends an approval_viewed audit event), so link unfurlers and mail scanners cannot decide. POST verifies the signed fields the form posts
// back, decides in the ledger first (pending → approved | rejected, conditionally) and only
// then completes the task. Every answer is an HTML page with approvalcore.SecurityHeaders; the
// error is always nil, so a client fault never becomes a Lambda error. Requests under
// /v1/approver/ are the IAM-authorized approver routes and go to handleInbox (JSON).
func (s *Service) HandleHTTP(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	if strings.Contains(req.RawPath, "/v1/approver/") || strings.HasSuffix(strings.TrimRight(req.RawPath, "/"), InboxPrefix) {
		return s.handleInbox(ctx, req), nil
	}
	id := req.PathParameters["approval_id"]
	if id == "" {
		id = lastSegment(req.RawPath)
	}
	switch m := strings.ToUpper(req.RequestContext.HTTP.Method); m {
	case http.MethodGet, http.MethodHead:
		resp := s.get(ctx, id, query(req), clientOf(req))
		if m == http.MethodHead {
			resp.Body = ""
		}
		return resp, nil
	case http.MethodPost:
		return s.postDecision(ctx, id, req), nil
	default:
		resp := resultPage(approvalcore.ResultPage{Kind: approvalcore.PageBadRequest, Detail: "Open the link from Slack."})
		resp.StatusCode = http.StatusMethodNotAllowed
		resp.Headers["Allow"] = "GET, POST"
		return resp, nil
	}
}

func (s *Service) get(ctx context.Context, id string, q url.Values, c client) events.APIGatewayV2HTTPResponse {
	claims, a, op, resp, ok := s.verifyAndLoad(ctx, id, q, c)
	if !ok {
		return resp
	}
	v, err := s.Review(ctx, a, op)
	if err != nil {
		// Part of a buy is never shown as if it were all of it.
		s.Log.ErrorContext(ctx, "approval page: what is bought cannot be read", "approvalId", id, "operationId", a.OperationID, "err", err)
		return resultPage(approvalcore.ResultPage{Kind: approvalcore.PageUnavailable})
	}
	o, err := approvalcore.Check(v, claims.Approver, s.Now())
	s.Log.InfoContext(ctx, "approval viewed", "approvalId", id, "operationId", a.OperationID, "approver", claims.Approver,
		"sourceIp", c.IP, "userAgent", c.UserAgent, "result", outcomeName(o, err))
	s.AppendEvent(ctx, a.Tenant, approval.TimelineOf(a), record.Event{
		Type: record.EventApprovalViewed, Actor: "approver:" + claims.Approver, Amount: a.Amount, Currency: a.Currency,
		Detail: approval.EventDetail{ApprovalID: id, Outcome: outcomeName(o, err), SourceIP: c.IP, UserAgent: c.UserAgent, KeyID: claims.KeyID}.Raw(),
	})
	if err != nil {
		return resultPage(approvalcore.ResultFromError(err, time.Time{}))
	}
	if o.Result != approvalcore.ResultPending {
		return resultPage(approvalcore.ResultFromOutcome(o, v))
	}
	return confirmPage(http.StatusOK, approvalcore.ConfirmPage{Approval: v, Approver: claims.Approver, Signed: signed(q)})
}

func (s *Service) postDecision(ctx context.Context, id string, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	c := clientOf(req)
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return resultPage(approvalcore.ResultFromError(approvalcore.ErrBadForm, time.Time{}))
		}
		body = b
	}
	d, posted, err := approvalcore.ParseDecisionForm(body, httpapi.Header(req, "Content-Type"))
	if err != nil {
		return resultPage(approvalcore.ResultFromError(err, time.Time{}))
	}
	claims, a, op, resp, ok := s.verifyAndLoad(ctx, id, posted, c)
	if !ok {
		return resp
	}
	d.ApprovalID, d.Approver = id, claims.Approver
	v := approval.View(a, op)
	o, err := approvalcore.Decide(v, d, s.Now())
	audit := approval.EventDetail{ApprovalID: id, Decision: string(d.Decision), SourceIP: c.IP, UserAgent: c.UserAgent, KeyID: claims.KeyID}
	switch {
	case errors.Is(err, approvalcore.ErrInvalidDecision), errors.Is(err, approvalcore.ErrCommentTooLong), errors.Is(err, approvalcore.ErrInvalidComment):
		// Nothing to record: ask again, keeping what they typed, showing the buy as the GET did.
		p := approvalcore.ResultFromError(err, time.Time{})
		v, perr := s.Review(ctx, a, op)
		if perr != nil {
			s.Log.ErrorContext(ctx, "approval page: what is bought cannot be read", "approvalId", id, "operationId", a.OperationID, "err", perr)
			return resultPage(approvalcore.ResultPage{Kind: approvalcore.PageUnavailable})
		}
		return confirmPage(http.StatusBadRequest, approvalcore.ConfirmPage{Approval: v, Approver: claims.Approver, Signed: signed(posted),
			Error: p.Detail, Comment: firstRunes(d.Comment, approvalcore.MaxCommentRunes)})
	case err != nil:
		audit.Outcome = outcomeName(o, err)
		s.refused(ctx, a, claims.Approver, audit)
		return resultPage(approvalcore.ResultFromError(err, time.Time{}))
	case o.Result == approvalcore.ResultAlreadyDecided && o.By == claims.Approver && s.undelivered(ctx, a):
		// The decider clicks again after their decision could not be handed over: hand the
		// recorded decision over again, whatever this click says.
		audit.Note = "retry of a failed hand-over"
		return s.deliver(ctx, a, op, claims.Approver, audit)
	case o.Result != approvalcore.ResultDecided:
		// Already decided, or expired: the truth, and nothing written but the attempt. An
		// approval past its expiry is marked expired by the workflow's timeout, not by a click.
		audit.Outcome = outcomeName(o, nil)
		s.refused(ctx, a, claims.Approver, audit)
		return resultPage(approvalcore.ResultFromOutcome(o, v))
	}

	decided, err := s.Cfg.Ledger.Decide(ctx, id, record.Decision{Outcome: record.ApprovalStatus(o.Status), By: claims.Approver, Comment: o.Comment})
	var de *record.DecisionError
	switch {
	case errors.As(err, &de):
		// Someone else decided first (or it expired meanwhile): report what the ledger says.
		cur := approval.View(de.Current, op)
		o2, err2 := approvalcore.Check(cur, claims.Approver, s.Now())
		if err2 == nil && o2.Result == approvalcore.ResultPending {
			o2 = approvalcore.Outcome{Result: approvalcore.ResultExpired, Status: approvalcore.StatusExpired, At: cur.ExpiresAt}
		}
		audit.Outcome = outcomeName(o2, err2)
		s.refused(ctx, de.Current, claims.Approver, audit)
		if err2 != nil {
			return resultPage(approvalcore.ResultFromError(err2, time.Time{}))
		}
		return resultPage(approvalcore.ResultFromOutcome(o2, cur))
	case err != nil:
		s.Log.ErrorContext(ctx, "approval decision not recorded", "approvalId", id, "err", err)
		return resultPage(approvalcore.ResultPage{Kind: approvalcore.PageUnavailable})
	}
	s.recordDecision(decided)

	return s.deliver(ctx, decided, op, claims.Approver, audit)
}

// deliver hands a decision recorded in the ledger to Step Functions, records the decision event
// with the delivery result, updates Slack and answers the decider.
func (s *Service) deliver(ctx context.Context, decided *record.Approval, op *record.Operation, approver string, audit approval.EventDetail) events.APIGatewayV2HTTPResponse {
	task := s.complete(ctx, decided, op)
	audit.Outcome, audit.Comment, audit.Task = string(decided.Status), decided.Comment, task
	s.AppendEvent(ctx, decided.Tenant, approval.TimelineOf(decided), record.Event{
		Type: record.EventDecision, Actor: "approver:" + approver,
		Amount: decided.Amount, Currency: decided.Currency, Reason: decided.Reason, Detail: audit.Raw(),
	})
	// A campaign's decision applies to every leg: each leg's timeline records it too.
	audit.CampaignID = decided.CampaignID
	for _, leg := range s.LegIDs(ctx, decided) {
		s.AppendEvent(ctx, decided.Tenant, leg, record.Event{
			Type: record.EventDecision, Actor: "approver:" + approver, Reason: decided.Reason, Detail: audit.Raw(),
		})
	}
	if task != taskFailed {
		s.UpdateSlack(ctx, decided, op)
	}
	s.Log.InfoContext(ctx, "approval decided", "approvalId", decided.ID, "operationId", decided.OperationID, "approver", approver,
		"decision", decided.Status, "sourceIp", audit.SourceIP, "task", task)

	dv := approval.View(decided, op)
	switch task {
	case taskGone:
		return messagePage(http.StatusGone, "Recorded, but too late",
			fmt.Sprintf("Your decision (%s by %s at %s) is recorded, but the buy had already stopped waiting for it: the approval window closed or the buy was stopped.",
				decided.Status, decided.Decider, approvalcore.FormatTime(decided.DecidedAt)),
			"Nothing will be bought on this approval. Ask the requester to submit the buy again if it is still needed.")
	case taskFailed:
		return messagePage(http.StatusBadGateway, "Recorded, not yet delivered",
			fmt.Sprintf("Your decision (%s by %s at %s) is recorded, but it could not be handed to the workflow yet.",
				decided.Status, decided.Decider, approvalcore.FormatTime(decided.DecidedAt)),
			"Your decision stands and nobody else can change it. Submit the form again in a minute to retry the hand-over.")
	}
	return resultPage(approvalcore.ResultFromOutcome(approvalcore.Outcome{
		Result: approvalcore.ResultDecided, Status: dv.Status, By: dv.DecidedBy, At: dv.DecidedAt, Comment: dv.Comment,
	}, dv))
}

// undelivered reports whether the latest decision event of a says its hand-over to Step
// Functions failed, or whether a decided approval has no decision event at all: the decider's
// process died between recording the decision and handing it over (the event follows the
// hand-over). Read errors count as delivered: the answer is then the plain truth.
func (s *Service) undelivered(ctx context.Context, a *record.Approval) bool {
	last, found := "", false
	cursor := ""
	for page := 0; page < 200; page++ {
		p, err := s.Cfg.Ledger.ListEvents(ctx, a.Tenant, approval.TimelineOf(a), record.MaxListLimit, cursor)
		if err != nil {
			s.Log.WarnContext(ctx, "timeline not readable", "approvalId", a.ID, "err", err)
			return false
		}
		for _, ev := range p.Items {
			var d approval.EventDetail
			if ev.Type == record.EventDecision && json.Unmarshal(ev.Detail, &d) == nil && d.ApprovalID == a.ID {
				last, found = d.Task, true
			}
		}
		if p.Cursor == "" {
			break
		}
		cursor = p.Cursor
	}
	return !found || last == taskFailed
}

// Task delivery results, as the decision event records them.
const (
	taskDelivered = "delivered"
	taskGone      = "gone"
	taskFailed    = "failed"
)

// complete hands a recorded decision to Step Functions: SendTaskSuccess with the approval
// output, or SendTaskFailure with ApprovalRejectedError. A few quick retries cover throttling;
// a token that is gone is not retried.
func (s *Service) complete(ctx context.Context, a *record.Approval, op *record.Operation) string {
	call := func() error {
		if a.Status == record.ApprovalApproved {
			return s.tasks.Succeed(ctx, a.TaskToken, workflow.ApprovalOutput{
				Decision: string(record.ApprovalApproved), ApprovalID: a.ID, DecidedBy: a.Decider,
				RecheckGovernance: op != nil && !op.GovernanceExpiresAt.IsZero() && !a.DecidedAt.Before(op.GovernanceExpiresAt),
			})
		}
		return s.tasks.Fail(ctx, a.TaskToken, rejectedErrorName, rejectionCause(a))
	}
	var err error
	for attempt, wait := 0, 100*time.Millisecond; attempt < 3; attempt, wait = attempt+1, wait*4 {
		if err = call(); err == nil {
			return taskDelivered
		}
		if errors.Is(err, sfn.ErrTaskGone) {
			if s.workflowTook(ctx, a) {
				// An earlier send (this loop's, or the SDK's own retry of one whose response was
				// lost) delivered the decision: the workflow has acted on it.
				s.Log.InfoContext(ctx, "approval task gone after the workflow took the decision", "approvalId", a.ID, "operationId", a.OperationID)
				return taskDelivered
			}
			s.Log.WarnContext(ctx, "approval task already gone", "approvalId", a.ID, "operationId", a.OperationID)
			return taskGone
		}
		if attempt < 2 {
			select {
			case <-ctx.Done():
				attempt = 3
			case <-time.After(wait):
			}
		}
	}
	s.Log.ErrorContext(ctx, "approval decision recorded but not delivered to step functions", "approvalId", a.ID,
		"operationId", a.OperationID, "err", err)
	return taskFailed
}

// goneRecheck is how long workflowTook watches the operation before it calls a token gone.
const goneRecheck = 2 * time.Second

// workflowTook reports whether the workflow acted on decision a although its task token
// answers gone: the operation leaves awaiting_approval the way a's decision sends it (an
// approval to the governance re-check, the create or the seller task; a rejection to
// rejected) within goneRecheck. A token that timed out (the buy expired) or that another path
// ended answers false.
func (s *Service) workflowTook(ctx context.Context, a *record.Approval) bool {
	deadline := time.Now().Add(goneRecheck)
	watched := a.OperationID
	if legs := s.LegIDs(ctx, a); len(legs) > 0 {
		watched = legs[0] // a campaign's decision moves every leg the same way
	}
	for {
		op, err := s.Cfg.Ledger.GetOperation(ctx, a.Tenant, watched)
		if err != nil {
			return false
		}
		switch {
		case a.Status == record.ApprovalRejected && op.Status == workflow.StatusRejected:
			return true
		case a.Status == record.ApprovalApproved && op.Status.Pending() && op.Status != workflow.StatusAwaitingApproval,
			a.Status == record.ApprovalApproved && op.Status == workflow.StatusCompleted:
			return true
		case op.Status.Terminal():
			return false
		}
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// rejectionCause is the SendTaskFailure cause: readable, with no token or link.
func rejectionCause(a *record.Approval) string {
	cause := (&workflow.ApprovalRejectedError{ApprovalID: a.ID, By: a.Decider}).Error() + " at " + approvalcore.FormatTime(a.DecidedAt)
	if a.Comment != "" {
		cause += ": " + record.Clip(a.Comment, 500)
	}
	return cause
}

// refused records a decision attempt that changed nothing.
func (s *Service) refused(ctx context.Context, a *record.Approval, approver string, d approval.EventDetail) {
	s.AppendEvent(ctx, a.Tenant, approval.TimelineOf(a), record.Event{
		Type: record.EventApprovalRefused, Actor: "approver:" + approver, Amount: a.Amount, Currency: a.Currency, Reason: a.Reason, Detail: d.Raw(),
	})
}

// verifyAndLoad checks the link's signature over its signed parameters, then reads the approval and its
// operation. When ok is false, resp is the page to serve.
func (s *Service) verifyAndLoad(ctx context.Context, id string, signed url.Values, c client) (claims approvalcore.Claims, a *record.Approval, op *record.Operation, resp events.APIGatewayV2HTTPResponse, ok bool) {
	claims, err := s.Cfg.Signer.Verify(id, signed)
	if err != nil {
		s.Log.InfoContext(ctx, "approval link refused", "approvalId", safeID(id), "sourceIp", c.IP, "err", err)
		return claims, nil, nil, linkError(err, claims), false
	}
	a, op, resp, ok = s.load(ctx, id)
	return claims, a, op, resp, ok
}

// load reads the approval and its operation. When ok is false, resp is the page to serve.
func (s *Service) load(ctx context.Context, id string) (a *record.Approval, op *record.Operation, resp events.APIGatewayV2HTTPResponse, ok bool) {
	a, err := s.Cfg.Ledger.GetApproval(ctx, id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		// A validly signed link for an unknown id: treat it as any other invalid link.
		return nil, nil, resultPage(approvalcore.ResultPage{Kind: approvalcore.PageInvalidLink}), false
	case err != nil:
		s.Log.ErrorContext(ctx, "approval not readable", "approvalId", id, "err", err)
		return nil, nil, resultPage(approvalcore.ResultPage{Kind: approvalcore.PageUnavailable}), false
	}
	if a.CampaignID != "" {
		return a, nil, events.APIGatewayV2HTTPResponse{}, true // a campaign's legs are read with its page
	}
	op, err = s.Cfg.Ledger.GetOperation(ctx, a.Tenant, a.OperationID)
	switch {
	case errors.Is(err, record.ErrNotFound):
		op = nil
	case err != nil:
		s.Log.ErrorContext(ctx, "operation not readable", "approvalId", id, "operationId", a.OperationID, "err", err)
		return nil, nil, resultPage(approvalcore.ResultPage{Kind: approvalcore.PageUnavailable}), false
	}
	return a, op, events.APIGatewayV2HTTPResponse{}, true
}

// linkError is the page for a link that does not verify: 403, whatever the reason, with the
// expiry time when the link is authentic but expired.
func linkError(err error, claims approvalcore.Claims) events.APIGatewayV2HTTPResponse {
	resp := resultPage(approvalcore.ResultFromError(err, claims.Expires))
	resp.StatusCode = http.StatusForbidden
	return resp
}

func outcomeName(o approvalcore.Outcome, err error) string {
	switch {
	case errors.Is(err, approvalcore.ErrSelfApproval):
		return "self_approval"
	case errors.Is(err, approvalcore.ErrNotApprover):
		return "not_approver"
	case err != nil:
		return "error"
	case o.Result == approvalcore.ResultAlreadyDecided:
		return "already_" + string(o.Status)
	default:
		return string(o.Result)
	}
}

func resultPage(p approvalcore.ResultPage) events.APIGatewayV2HTTPResponse {
	return render(p.StatusCode(), func(w io.Writer) error { return approvalcore.RenderResult(w, p) })
}

func confirmPage(status int, p approvalcore.ConfirmPage) events.APIGatewayV2HTTPResponse {
	return render(status, func(w io.Writer) error { return approvalcore.RenderConfirm(w, p) })
}

// messagePage is a plain page for the two answers approval has no page kind for (a decision
// recorded after the task was gone, or not yet delivered).
func messagePage(status int, title, line, hint string) events.APIGatewayV2HTTPResponse {
	return render(status, func(w io.Writer) error {
		return approvalcore.RenderMessage(w, title, line, hint)
	})
}

func render(status int, fn func(io.Writer) error) events.APIGatewayV2HTTPResponse {
	var b bytes.Buffer
	h := approvalcore.SecurityHeaders()
	if err := fn(&b); err != nil {
		h["Content-Type"] = "text/plain; charset=utf-8"
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusInternalServerError, Headers: h, Body: "Something went wrong on our side. Nothing was decided.\n"}
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: h, Body: b.String()}
}

// signed keeps only the signed link parameters, for the confirm form's hidden fields.
func signed(q url.Values) url.Values {
	out := url.Values{}
	for _, k := range approvalcore.SignedParams {
		if v, ok := q[k]; ok {
			out[k] = v
		}
	}
	return out
}

// query returns the request's query parameters, keeping repeats (the raw query string is the
// source; API Gateway joins repeated parameters with commas in the map).
func query(req events.APIGatewayV2HTTPRequest) url.Values {
	if req.RawQueryString != "" {
		if q, err := url.ParseQuery(req.RawQueryString); err == nil {
			return q
		}
		return url.Values{}
	}
	q := url.Values{}
	for k, v := range req.QueryStringParameters {
		q[k] = strings.Split(v, ",")
	}
	return q
}

func lastSegment(p string) string {
	p = strings.TrimRight(p, "/")
	return p[strings.LastIndexByte(p, '/')+1:]
}

// safeID bounds an unverified id before it reaches a log line.
func safeID(id string) string { return record.Clip(id, 64) }

// firstRunes keeps the first n characters of a comment the form refused, so the page shows
// what the approver typed within the limit the form counts in characters (record.Clip bounds
// stored text in bytes and marks the cut).
func firstRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

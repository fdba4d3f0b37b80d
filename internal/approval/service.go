package approval

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/record"

	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/slack"
	"github.com/buyflow/buyflow/internal/workflow"
)

// ledger is the part of the ledger the approval use cases need; *ledger.Store satisfies it.
type ledger interface {
	CreateApproval(ctx context.Context, a record.Approval) (*record.Approval, error)
	GetApproval(ctx context.Context, id string) (*record.Approval, error)
	GetIntent(ctx context.Context, tenant, operationID, task string) (*record.Intent, error)
	Decide(ctx context.Context, id string, d record.Decision) (*record.Approval, error)
	SetSlackMessages(ctx context.Context, id string, refs []record.SlackRef) error
	GetOperation(ctx context.Context, tenant, id string) (*record.Operation, error)
	ListOperations(ctx context.Context, tenant string, o record.ListOptions) (record.Page[record.View], error)
	Transition(ctx context.Context, tenant, id string, to workflow.Status, expectedVersion int64, ch record.Patch) (*record.Operation, error)
	AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error
	ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (record.Page[record.Event], error)
	GetCampaign(ctx context.Context, tenant, id string) (*record.Campaign, error)
	SetCampaignApproval(ctx context.Context, tenant, id, approvalID string) error
}

// Config holds what both approval Lambdas need: the ledger, the Slack client (notify posts the
// request, approve updates it after a decision), the link signer, the approval policy (notify
// picks the approvers, approve maps the IAM callers of the approver routes), the public root
// of the links and the clock.
type Config struct {
	Ledger ledger
	// Slack posts and updates messages; Delivery says whether each approver gets a direct
	// message (bot) or one shared message goes to a channel (webhook).
	Slack    slack.Client
	Delivery slack.Delivery
	Signer   *approvalcore.Signer
	Policy   approvalpolicy.Policy
	// BaseURL is the public root of the HTTP API the links point at.
	BaseURL string
	// Now is the clock; it must be the ledger's clock too.
	Now func() time.Time
	// Metrics receives the approval metrics (metrics.ApprovalLatency, MetricApprovalDecided
	// and metrics.ApprovalRejected from a decision, metrics.Timeouts from an expiry). The
	// function's wiring flushes it once per invocation; nil records nothing.
	Metrics *metrics.Recorder
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Base is what the notify and approve use cases share: the configuration and the logger.
// Each embeds it.
type Base struct {
	Cfg Config
	Log *slog.Logger
}

// Problems lists what both Lambdas need and cfg lacks.
func (cfg Config) Problems() []error {
	var errs []error
	if cfg.Ledger == nil {
		errs = append(errs, errors.New("no ledger"))
	}
	if cfg.Signer == nil {
		errs = append(errs, errors.New("no link signer"))
	}
	if cfg.Now == nil {
		errs = append(errs, errors.New("no clock"))
	}
	return errs
}

// NewBase returns the shared part of a use case, or every problem with cfg at once:
// problems (what the use case itself needs and cfg lacks) joined with none of its own.
func NewBase(cfg Config, problems []error) (*Base, error) {
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Base{Cfg: cfg, Log: cfg.Logger}, nil
}

// Now is the configured clock, in UTC.
func (s *Base) Now() time.Time { return s.Cfg.Now().UTC() }

// ApprovalID derives the approval id from the task token: 128 bits of its SHA-256 in base64url,
// prefixed "apr_". A retried request with the same token finds the same approval; the token
// itself cannot be recovered from the id.
func ApprovalID(taskToken string) string {
	sum := sha256.Sum256([]byte("buyflow-approval-id/v1\x00" + taskToken))
	return "apr_" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// view converts a ledger approval and its operation into what the pages and Slack messages
// show. It never copies the task token.
func View(a *record.Approval, op *record.Operation) approvalcore.Approval {
	v := approvalcore.Approval{
		ID: a.ID, OperationID: a.OperationID, Tenant: a.Tenant,
		Approvers: a.Approvers, EscalationApprovers: a.EscalationApprovers, Requester: a.Requester,
		Amount: ToMoney(a.Amount, a.Currency), Reason: approvalcore.ReasonCode(a.Reason), ReasonText: a.ReasonText,
		Status: approvalcore.Status(a.Status), DecidedBy: a.Decider, DecidedAt: a.DecidedAt,
		Comment: a.Comment, ExpiresAt: a.ExpiresAt,
	}
	v.Summary = "Media buy " + a.OperationID
	if a.CampaignID != "" {
		v.OperationID, v.Summary = a.CampaignID, "Campaign "+a.CampaignID
	}
	if op != nil {
		v.Seller = op.SellerID
		v.Summary = Summary(op.ID, op.PONumber, op.Kind, op.ParentID)
	}
	return v
}

// Summary names what an operation's approval is about in a few words: "Media buy, PO X", or
// for a change "Change to media buy, PO X".
func Summary(opID, po, kind, parentID string) string {
	s := "Media buy " + opID
	if kind == record.KindModification {
		s = "Change to media buy " + parentID
	}
	if po != "" {
		s = "Media buy, PO " + po
		if kind == record.KindModification {
			s = "Change to media buy, PO " + po
		}
	}
	return s
}

// toMoney reads the ledger's decimal amount exactly (the submit stored it in the currency's
// minor unit; nothing is rounded). An amount it cannot read is zero: a request for approval
// refuses such an amount before any page or message shows it.
func ToMoney(amount, currency string) approvalcore.Money {
	a, err := money.ParseDecimal(strings.TrimSpace(amount), currency)
	if err != nil {
		return approvalcore.Money{Currency: currency}
	}
	return approvalcore.Money{Minor: a.Minor, Currency: currency}
}

// eventDetail is the Detail JSON of this package's events.
type EventDetail struct {
	ApprovalID string   `json:"approval_id"`
	Round      int      `json:"round"`
	Escalation bool     `json:"escalation,omitempty"`
	Approvers  []string `json:"approvers,omitempty"`
	Escalated  bool     `json:"escalated,omitempty"`
	Decision   string   `json:"decision,omitempty"`
	Outcome    string   `json:"outcome,omitempty"`
	Comment    string   `json:"comment,omitempty"`
	SourceIP   string   `json:"source_ip,omitempty"`
	UserAgent  string   `json:"user_agent,omitempty"`
	KeyID      string   `json:"key_id,omitempty"`
	Task       string   `json:"task,omitempty"`
	Slack      string   `json:"slack,omitempty"`
	Note       string   `json:"note,omitempty"`
	// CampaignID marks the request and the decision of a campaign's approval on its legs.
	CampaignID string `json:"campaign_id,omitempty"`
}

func (d EventDetail) Raw() json.RawMessage {
	b, err := json.Marshal(d)
	if err != nil {
		return nil // cannot happen: strings, ints and bools only
	}
	return b
}

// round is one approval request of an operation, as its timeline records it.
type Round struct {
	ApprovalID string
	Round      int
	Escalation bool
	// Expired and Escalated come from the approval_expired event, if any.
	Expired   bool
	Escalated bool
}

// history reads the approval rounds of an operation from its timeline: the ledger keys
// approvals by id alone, and the timeline is where an operation's approvals are listed.
type History struct {
	rounds []Round // in round order
}

func (h History) ByID(id string) (Round, bool) {
	for _, r := range h.rounds {
		if r.ApprovalID == id {
			return r, true
		}
	}
	return Round{}, false
}

// RoundOf is the round of approval id: the one h records (known), or the round after the
// latest, on the escalation approvers when that one expired and escalated.
func (h History) RoundOf(id string) (rd Round, known bool) {
	if rd, ok := h.ByID(id); ok {
		return rd, true
	}
	rd = Round{ApprovalID: id}
	if last, ok := h.Latest(); ok {
		rd.Round = last.Round + 1
		rd.Escalation = last.Expired && last.Escalated
	}
	return rd, false
}

func (h History) Latest() (Round, bool) {
	if len(h.rounds) == 0 {
		return Round{}, false
	}
	return h.rounds[len(h.rounds)-1], true
}

func (s *Base) History(ctx context.Context, tenant, opID string) (History, error) {
	var h History
	idx := map[string]int{}
	err := s.eachEvent(ctx, tenant, opID, func(ev record.Event) {
		if ev.Type != record.EventApprovalRequested && ev.Type != record.EventApprovalExpired {
			return
		}
		var d EventDetail
		if err := json.Unmarshal(ev.Detail, &d); err != nil || d.ApprovalID == "" {
			return
		}
		i, ok := idx[d.ApprovalID]
		if !ok {
			idx[d.ApprovalID] = len(h.rounds)
			h.rounds = append(h.rounds, Round{ApprovalID: d.ApprovalID, Round: d.Round})
			i = len(h.rounds) - 1
		}
		switch ev.Type {
		case record.EventApprovalRequested:
			h.rounds[i].Round, h.rounds[i].Escalation = d.Round, d.Escalation
		case record.EventApprovalExpired:
			h.rounds[i].Expired, h.rounds[i].Escalated = true, d.Escalated
		}
	})
	if err != nil {
		return History{}, err
	}
	// Events written in the same instant may come back in any order: sort by round.
	slices.SortStableFunc(h.rounds, func(a, b Round) int { return cmp.Compare(a.Round, b.Round) })
	return h, nil
}

// linkExpiry is when a review link signed now for a stops working: the approval's expiry,
// capped by the policy's link TTL and the longest lifetime a link may have.
func (s *Base) LinkExpiry(a *record.Approval) time.Time {
	now := s.Now()
	exp := a.ExpiresAt
	if ttl := time.Duration(s.Cfg.Policy.LinkTTLSeconds) * time.Second; ttl > 0 && now.Add(ttl).Before(exp) {
		exp = now.Add(ttl)
	}
	if limit := now.Add(approvalcore.MaxLinkLifetime); exp.After(limit) {
		exp = limit
	}
	return exp
}

// updateSlack replaces the request messages with the approval's final status. Failures are
// logged: the ledger already holds the truth.
func (s *Base) UpdateSlack(ctx context.Context, a *record.Approval, op *record.Operation) {
	if s.Cfg.Slack == nil || len(a.SlackMessages) == 0 {
		return
	}
	refs := make([]slack.Ref, len(a.SlackMessages))
	for i, r := range a.SlackMessages {
		refs[i] = slack.Ref{Channel: r.Channel, TS: r.TS}
	}
	v := View(a, op)
	if op != nil && op.Kind == record.KindModification {
		// The status names what was decided ("Approved: change to a media buy").
		if p, err := s.Purchase(ctx, op); err == nil {
			v.Purchase = p
		}
	}
	if err := slack.PostStatus(ctx, s.Cfg.Slack, v, refs); err != nil {
		s.Log.WarnContext(ctx, "slack status update failed", "approvalId", a.ID, "err", err)
	}
}

// appendEvent records an audit event whose loss must not change the answer; failures are logged.
func (s *Base) AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) {
	if err := s.Cfg.Ledger.AppendEvent(ctx, tenant, opID, ev); err != nil {
		s.Log.ErrorContext(ctx, "audit event not recorded", "operationId", opID, "type", ev.Type, "err", err)
	}
}

func (s *Base) Operation(ctx context.Context, tenant, id string) (*record.Operation, error) {
	op, err := s.Cfg.Ledger.GetOperation(ctx, tenant, id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return nil, &workflow.NotFoundError{OperationID: id}
	case err != nil:
		return nil, fmt.Errorf("approval: read operation %s: %w", id, err)
	}
	return op, nil
}

package buy

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/record"
)

// Caller is who asks: the tenant (the buyer's account, from the caller's identity, never the
// body) and the principal (a user or role), recorded as the requester.
type Caller struct {
	Tenant    string
	Principal string
}

// LinksFor returns the links of operation id.
func LinksFor(id string) api.Links {
	return api.Links{Self: "/v1/media-buys/" + id, Events: "/v1/media-buys/" + id + "/events"}
}

// ErrNotFound reports an operation that does not exist for the caller's tenant (including
// one that exists for another tenant: the answer is the same).
var ErrNotFound = errors.New("media buy not found")

// EventOf is the API view of one timeline event.
func EventOf(e record.Event) api.Event {
	ev := api.Event{At: e.At.UTC().Format(time.RFC3339Nano), Type: e.Type, Actor: e.Actor,
		From: string(e.From), To: string(e.To), Reason: e.Reason, Detail: e.Detail}
	if e.Amount != "" {
		ev.Amount = strings.TrimSpace(e.Amount + " " + e.Currency)
	}
	return ev
}

// ApprovalOf is the API view of a stored approval (without the request's time and round,
// which its subject's timeline holds).
func ApprovalOf(a *record.Approval) *api.Approval {
	v := &api.Approval{
		ApprovalID: a.ID, CampaignID: a.CampaignID, Status: string(a.Status), Approvers: a.Approvers,
		Reason: a.Reason, ReasonText: record.Clip(a.ReasonText, 500), Legs: a.Legs,
		ExpiresAt: RFC3339(a.ExpiresAt), EscalatesTo: a.EscalationApprovers,
	}
	if a.Amount != "" {
		v.Amount = strings.TrimSpace(a.Amount + " " + a.Currency)
	}
	if a.Status == record.ApprovalApproved || a.Status == record.ApprovalRejected {
		v.DecidedBy, v.DecidedAt = a.Decider, RFC3339(a.DecidedAt)
	}
	return v
}

// RFC3339 formats a time for an API view, in UTC; the zero time is empty.
func RFC3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// maxSellerWords bounds the seller's message a view shows, whoever wrote the event: the
// poll and the webhook bound it when they record it (sellertask.MaxMessageBytes), an older or
// another writer's event may not have.
const maxSellerWords = 1000

// SellerWordsOf is the seller's message an event of the seller wait carries (a poll's, a
// webhook's, a create or update answer's detail.message), or nil when it carries none.
func SellerWordsOf(e record.Event) *api.SellerWords {
	switch e.Type {
	case record.EventPoll, record.EventWebhook, record.EventSellerCall, record.EventModificationSellerCall:
	default:
		return nil
	}
	var d struct {
		Message      any `json:"message"`
		SellerStatus any `json:"seller_status"`
	}
	if json.Unmarshal(e.Detail, &d) != nil {
		return nil
	}
	msg, _ := d.Message.(string)
	if msg = strings.TrimSpace(msg); msg == "" {
		return nil
	}
	st, _ := d.SellerStatus.(string)
	return &api.SellerWords{Message: record.Clip(msg, maxSellerWords), SellerStatus: record.Clip(st, 64), At: e.At.UTC().Format(time.RFC3339Nano)}
}

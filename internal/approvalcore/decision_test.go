package approvalcore

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func pendingApproval() Approval {
	return Approval{
		ID:                  "apr1",
		OperationID:         "op_7f3a",
		Tenant:              "acct_1",
		Approvers:           []string{"alice", "bob"},
		EscalationApprovers: []string{"cfo"},
		Requester:           "rita",
		Seller:              "Example Sports Network",
		Amount:              Money{Minor: 1250000, Currency: "USD"},
		Summary:             "Q1 video campaign, 3 packages",
		Reason:              ReasonPolicyThreshold,
		ReasonText:          "Budget over USD 10,000.00",
		Status:              StatusPending,
		ExpiresAt:           t0.Add(24 * time.Hour),
		Purchase: Purchase{
			Start: "2026-01-05T00:00:00Z", End: "2026-03-29T23:59:59Z",
			Packages: []Package{
				{Product: "ctv_premium_sports", Start: "2026-01-05T00:00:00Z", End: "2026-03-29T23:59:59Z", Budget: Money{Minor: 600000, Currency: "USD"}},
				{Product: "olv_highlights", Start: "2026-01-05T00:00:00Z", End: "2026-03-29T23:59:59Z", Budget: Money{Minor: 425000, Currency: "USD"}},
				{Product: "display <run> & site", Start: "2026-01-05T00:00:00Z", End: "2026-02-28T23:59:59Z", Budget: Money{Minor: 225000, Currency: "USD"}},
			},
			Governance: Verdict{Verdict: "conditions", Conditions: []Condition{
				{Field: "packages[2].end_time", Reason: "Display must end with the February flight"},
				{Field: "packages[1].targeting_overlay", Reason: "US and Canada only", NeedsPerson: true},
			}},
		},
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	decidedAt := t0.Add(-time.Hour)
	approved := pendingApproval()
	approved.Status, approved.DecidedBy, approved.DecidedAt, approved.Comment = StatusApproved, "bob", decidedAt, "ok"
	rejected := pendingApproval()
	rejected.Status, rejected.DecidedBy, rejected.DecidedAt = StatusRejected, "bob", decidedAt
	expired := pendingApproval()
	expired.Status = StatusExpired
	brokenDecided := pendingApproval()
	brokenDecided.Status = StatusApproved
	unknownStatus := pendingApproval()
	unknownStatus.Status = "paused"
	requesterListed := pendingApproval()
	requesterListed.Approvers = append(requesterListed.Approvers, "rita")

	req := func(approver string, d Decision, comment string) DecisionRequest {
		return DecisionRequest{ApprovalID: "apr1", Approver: approver, Decision: d, Comment: comment}
	}
	tests := []struct {
		name    string
		a       Approval
		d       DecisionRequest
		now     time.Time
		want    Outcome
		wantErr error
		wantMsg string
	}{
		{name: "approve", a: pendingApproval(), d: req("alice", DecisionApprove, "  fine by me \r\n"), now: t0,
			want:    Outcome{Result: ResultDecided, Status: StatusApproved, By: "alice", At: t0, Comment: "fine by me", Record: true},
			wantMsg: "approved by alice at 2026-11-30 05:00 UTC"},
		{name: "reject", a: pendingApproval(), d: req("bob", DecisionReject, ""), now: t0,
			want:    Outcome{Result: ResultDecided, Status: StatusRejected, By: "bob", At: t0, Record: true},
			wantMsg: "rejected by bob at 2026-11-30 05:00 UTC"},
		{name: "escalation approver", a: pendingApproval(), d: req("cfo", DecisionApprove, ""), now: t0,
			want: Outcome{Result: ResultDecided, Status: StatusApproved, By: "cfo", At: t0, Record: true}},
		{name: "already approved", a: approved, d: req("alice", DecisionReject, ""), now: t0,
			want:    Outcome{Result: ResultAlreadyDecided, Status: StatusApproved, By: "bob", At: decidedAt, Comment: "ok"},
			wantMsg: "already approved by bob at 2026-11-30 04:00 UTC"},
		{name: "already rejected", a: rejected, d: req("alice", DecisionApprove, ""), now: t0,
			want:    Outcome{Result: ResultAlreadyDecided, Status: StatusRejected, By: "bob", At: decidedAt},
			wantMsg: "already rejected by bob at 2026-11-30 04:00 UTC"},
		{name: "double click by the decider", a: approved, d: req("bob", DecisionApprove, ""), now: t0,
			want: Outcome{Result: ResultAlreadyDecided, Status: StatusApproved, By: "bob", At: decidedAt, Comment: "ok"}},
		{name: "late click with bad input still gets the truth", a: approved, d: req("alice", "maybe", strings.Repeat("x", MaxCommentRunes+1)), now: t0,
			want: Outcome{Result: ResultAlreadyDecided, Status: StatusApproved, By: "bob", At: decidedAt, Comment: "ok"}},
		{name: "expired in ledger", a: expired, d: req("alice", DecisionApprove, ""), now: t0,
			want:    Outcome{Result: ResultExpired, Status: StatusExpired, At: expired.ExpiresAt},
			wantMsg: "expired at 2026-12-01 05:00 UTC"},
		{name: "pending past expiry is recorded expired", a: pendingApproval(), d: req("alice", DecisionApprove, ""), now: t0.Add(24 * time.Hour),
			want: Outcome{Result: ResultExpired, Status: StatusExpired, At: t0.Add(24 * time.Hour), Record: true}},
		{name: "one second before expiry decides", a: pendingApproval(), d: req("alice", DecisionApprove, ""), now: t0.Add(24*time.Hour - time.Second),
			want: Outcome{Result: ResultDecided, Status: StatusApproved, By: "alice", At: t0.Add(24*time.Hour - time.Second), Record: true}},
		{name: "requester cannot approve own buy", a: requesterListed, d: req("rita", DecisionApprove, ""), now: t0, wantErr: ErrSelfApproval},
		{name: "requester cannot reject own buy either", a: requesterListed, d: req("rita", DecisionReject, ""), now: t0, wantErr: ErrSelfApproval},
		{name: "unlisted requester is told why", a: pendingApproval(), d: req("rita", DecisionApprove, ""), now: t0, wantErr: ErrSelfApproval},
		{name: "stranger", a: pendingApproval(), d: req("mallory", DecisionApprove, ""), now: t0, wantErr: ErrNotApprover},
		{name: "stranger does not learn the decision", a: approved, d: req("mallory", DecisionApprove, ""), now: t0, wantErr: ErrNotApprover},
		{name: "empty approver", a: pendingApproval(), d: req("", DecisionApprove, ""), now: t0, wantErr: ErrNotApprover},
		{name: "other approval", a: pendingApproval(), d: DecisionRequest{ApprovalID: "apr2", Approver: "alice", Decision: DecisionApprove}, now: t0, wantErr: ErrWrongApproval},
		{name: "no approval id", a: pendingApproval(), d: DecisionRequest{Approver: "alice", Decision: DecisionApprove}, now: t0, wantErr: ErrWrongApproval},
		{name: "bad decision", a: pendingApproval(), d: req("alice", "APPROVE", ""), now: t0, wantErr: ErrInvalidDecision},
		{name: "empty decision", a: pendingApproval(), d: req("alice", "", ""), now: t0, wantErr: ErrInvalidDecision},
		{name: "comment at limit", a: pendingApproval(), d: req("alice", DecisionReject, strings.Repeat("é", MaxCommentRunes)), now: t0,
			want: Outcome{Result: ResultDecided, Status: StatusRejected, By: "alice", At: t0, Comment: strings.Repeat("é", MaxCommentRunes), Record: true}},
		{name: "comment too long", a: pendingApproval(), d: req("alice", DecisionApprove, strings.Repeat("é", MaxCommentRunes+1)), now: t0, wantErr: ErrCommentTooLong},
		{name: "comment control char", a: pendingApproval(), d: req("alice", DecisionApprove, "ok\x00"), now: t0, wantErr: ErrInvalidComment},
		{name: "comment invalid utf-8", a: pendingApproval(), d: req("alice", DecisionApprove, "ok\xff"), now: t0, wantErr: ErrInvalidComment},
		{name: "decided without decider", a: brokenDecided, d: req("alice", DecisionApprove, ""), now: t0, wantErr: ErrInvalidState},
		{name: "unknown status", a: unknownStatus, d: req("alice", DecisionApprove, ""), now: t0, wantErr: ErrInvalidState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decide(tt.a, tt.d, tt.now)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("outcome = %+v\nwant      %+v", got, tt.want)
			}
			if tt.wantMsg != "" && got.Message() != tt.wantMsg {
				t.Errorf("Message() = %q, want %q", got.Message(), tt.wantMsg)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	approved := pendingApproval()
	approved.Status, approved.DecidedBy, approved.DecidedAt = StatusApproved, "bob", t0
	tests := []struct {
		name     string
		a        Approval
		approver string
		now      time.Time
		want     Result
		wantErr  error
	}{
		{"pending shows the form", pendingApproval(), "alice", t0, ResultPending, nil},
		{"decided shows the truth", approved, "alice", t0, ResultAlreadyDecided, nil},
		{"past expiry shows expired and records nothing", pendingApproval(), "alice", t0.Add(48 * time.Hour), ResultExpired, nil},
		{"self", func() Approval { a := pendingApproval(); a.EscalationApprovers = []string{"rita"}; return a }(), "rita", t0, "", ErrSelfApproval},
		{"stranger", pendingApproval(), "mallory", t0, "", ErrNotApprover},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Check(tt.a, tt.approver, tt.now)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got.Result != tt.want || got.Record {
				t.Fatalf("outcome = %+v, want result %q and Record false", got, tt.want)
			}
		})
	}
}

func TestMoneyString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		m    Money
		want string
	}{
		{Money{1250000, "USD"}, "USD 12,500.00"},
		{Money{5, "eur"}, "EUR 0.05"},
		{Money{0, "GBP"}, "GBP 0.00"},
		{Money{100000000, "JPY"}, "JPY 100,000,000"},
		{Money{1250, "KWD"}, "KWD 1.250"},
		{Money{-123456, "USD"}, "USD -1,234.56"},
		{Money{999, "XYZ"}, "XYZ 9.99"},
		{Money{100, ""}, "??? 1.00"},
		{Money{math.MaxInt64, "USD"}, "USD 92,233,720,368,547,758.07"},
		{Money{math.MinInt64, "USD"}, "USD -92,233,720,368,547,758.08"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.m, got, tt.want)
		}
	}
}

package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

func TestIntentIsWrittenOnce(t *testing.T) {
	dynamotest.SkipOnMoto(t, motoNotIsolated)
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	first := record.Intent{Tenant: "acme", OperationID: "op-1", Task: "create_media_buy", IdempotencyKey: "k-1", Request: []byte(`{"a":1}`)}
	_, created, err := s.PutIntent(ctx, first)
	if err != nil || !created {
		t.Fatalf("first put: %v, created %v", err, created)
	}
	second := first
	second.IdempotencyKey, second.Request = "k-2", []byte(`{"a":2}`)
	got, created, err := s.PutIntent(ctx, second)
	if err != nil || created || got.IdempotencyKey != "k-1" || string(got.Request) != `{"a":1}` {
		t.Fatalf("second put: %+v, created %v, %v; want the first intent", got, created, err)
	}
	read, err := s.GetIntent(ctx, "acme", "op-1", "create_media_buy")
	if err != nil || read.IdempotencyKey != "k-1" || string(read.Request) != `{"a":1}` {
		t.Fatalf("get: %+v, %v", read, err)
	}
	if _, err := s.GetIntent(ctx, "acme", "op-1", "update_media_buy"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("missing intent: err = %v", err)
	}
}

func TestWebhookReceiptDuplicate(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	r := record.Receipt{SellerID: "seller-1", IdempotencyKey: "wh-1", OperationID: "op-1", TaskID: "task-1"}
	steps := []struct {
		name    string
		advance time.Duration
		r       record.Receipt
		dup     bool
	}{
		{"first delivery", 0, r, false},
		{"redelivery", time.Hour, r, true},
		{"same key from another seller", 0, record.Receipt{SellerID: "seller-2", IdempotencyKey: "wh-1"}, false},
		{"redelivery after 47 h", 46 * time.Hour, r, true},
		{"after the receipt expired (TTL not yet run)", 2 * time.Hour, r, false},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		dup, err := s.RecordReceipt(ctx, st.r)
		if err != nil || dup != st.dup {
			t.Fatalf("%s: duplicate = %v, err = %v; want %v", st.name, dup, err, st.dup)
		}
	}
}

func TestSeenNonceReplay(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	until := clk.Now().Add(5 * time.Minute)
	for i, want := range []bool{false, true} {
		seen, err := s.SeenNonce(ctx, "key-1", "nonce-1", until)
		if err != nil || seen != want {
			t.Fatalf("call %d: seen = %v, err = %v", i, seen, err)
		}
	}
	if seen, _ := s.Seen(ctx, "key-2", "nonce-1", until); seen {
		t.Fatal("same nonce under another key id reported as seen")
	}
	clk.Advance(6 * time.Minute)
	if seen, _ := s.SeenNonce(ctx, "key-1", "nonce-1", clk.Now().Add(5*time.Minute)); seen {
		t.Fatal("expired nonce still reported as seen")
	}
}

func newApproval(id string, expires time.Time) record.Approval {
	return record.Approval{
		ID: id, Tenant: "acme", OperationID: "op-1", TaskToken: "tok-" + id,
		Approvers: []string{"U1", "U2"}, Requester: "U9", Amount: "25000.00", Currency: "USD",
		Reason: "budget over threshold", ExpiresAt: expires,
	}
}

func TestApprovalDecidedOnce(t *testing.T) {
	dynamotest.SkipOnMoto(t, motoNotIsolated)
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateApproval(ctx, newApproval("ap-1", clk.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateApproval(ctx, newApproval("ap-1", clk.Now().Add(time.Hour))); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("duplicate create: err = %v", err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		wins    []*record.Approval
		losers  []*record.DecisionError
		unknown []error
	)
	decisions := []record.Decision{
		{Outcome: record.ApprovalApproved, By: "U1", Comment: "ok"},
		{Outcome: record.ApprovalRejected, By: "U2", Comment: "no"},
	}
	start := make(chan struct{})
	for _, d := range decisions {
		wg.Go(func() {
			<-start
			a, err := s.Decide(ctx, "ap-1", d)
			mu.Lock()
			defer mu.Unlock()
			var de *record.DecisionError
			switch {
			case err == nil:
				wins = append(wins, a)
			case errors.As(err, &de):
				losers = append(losers, de)
			default:
				unknown = append(unknown, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(unknown) > 0 || len(wins) != 1 || len(losers) != 1 {
		t.Fatalf("wins %d, losers %d, errors %v", len(wins), len(losers), unknown)
	}
	w, l := wins[0], losers[0].Current
	if w.TaskToken != "tok-ap-1" || w.DecidedAt.IsZero() {
		t.Fatalf("winner record: %+v", w)
	}
	if l.Status != w.Status || l.Decider != w.Decider || !l.DecidedAt.Equal(w.DecidedAt) {
		t.Fatalf("loser sees %s by %s at %s, winner %s by %s at %s", l.Status, l.Decider, l.DecidedAt, w.Status, w.Decider, w.DecidedAt)
	}
	refs := []record.SlackRef{{Channel: "C1", TS: "1.2"}}
	if err := s.SetSlackMessages(ctx, "ap-1", refs); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetApproval(ctx, "ap-1")
	if err != nil || got.Tenant != "acme" || got.Status != w.Status || len(got.SlackMessages) != 1 || got.SlackMessages[0] != refs[0] {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if err := s.SetSlackMessages(ctx, "ap-missing", refs); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("slack refs of a missing approval: %v", err)
	}
}

func TestApprovalExpired(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	expires := clk.Now().Add(time.Hour)
	if _, err := s.CreateApproval(ctx, newApproval("ap-2", expires)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour) // expires_at == now: too late
	_, err := s.Decide(ctx, "ap-2", record.Decision{Outcome: record.ApprovalApproved, By: "U1"})
	var de *record.DecisionError
	if !errors.As(err, &de) || de.Current.Status != record.ApprovalPending || !de.Current.ExpiresAt.Equal(expires) {
		t.Fatalf("late approve: err = %v", err)
	}
	a, err := s.Decide(ctx, "ap-2", record.Decision{Outcome: record.ApprovalExpired, By: "system"})
	if err != nil || a.Status != record.ApprovalExpired {
		t.Fatalf("expire: %+v, %v", a, err)
	}
	if _, err := s.Decide(ctx, "ap-2", record.Decision{Outcome: record.ApprovalExpired, By: "system"}); !errors.As(err, &de) || de.Current.Status != record.ApprovalExpired {
		t.Fatalf("second expire: err = %v", err)
	}
	if _, err := s.Decide(ctx, "ap-missing", record.Decision{Outcome: record.ApprovalApproved, By: "U1"}); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("missing approval: err = %v", err)
	}
}

func TestEventsOrderedAndPaginated(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, newOp("op-1"))
	want := []string{record.EventCreated}
	for _, to := range []workflow.Status{workflow.StatusCheckingGovernance, workflow.StatusCreating} {
		clk.Advance(time.Second)
		if _, err := s.Transition(ctx, "acme", "op-1", to, record.AnyVersion, record.Patch{Actor: "system"}); err != nil {
			t.Fatal(err)
		}
		want = append(want, record.EventTransition)
		clk.Advance(10 * time.Millisecond)
		if err := s.AppendEvent(ctx, "acme", "op-1", record.Event{Type: "call", Actor: "create", Detail: []byte(`{"tool":"x"}`)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, "call")
	}
	// Two events in the same nanosecond keep distinct keys.
	if err := s.AppendEvent(ctx, "acme", "op-1", record.Event{Type: "poll"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvent(ctx, "acme", "op-1", record.Event{Type: "poll"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "poll", "poll")

	var got []record.Event
	cursor := ""
	for range 10 {
		page, err := s.ListEvents(ctx, "acme", "op-1", 3, cursor)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page.Items...)
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Type != want[i] {
			t.Fatalf("event %d is %s, want %s", i, got[i].Type, want[i])
		}
		if i > 0 && got[i].At.Before(got[i-1].At) {
			t.Fatalf("event %d at %s before %s", i, got[i].At, got[i-1].At)
		}
	}
	if got[1].To != workflow.StatusCheckingGovernance || got[0].Amount != "1500.00" {
		t.Fatalf("event fields: %+v %+v", got[0], got[1])
	}
}

func TestReleasedReceiptIsAppliedAgain(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	r := record.Receipt{SellerID: "seller-1", IdempotencyKey: "wh-release"}
	if dup, err := s.RecordReceipt(ctx, r); err != nil || dup {
		t.Fatalf("first: %v %v", dup, err)
	}
	if err := s.ReleaseReceipt(ctx, "seller-1", "wh-release"); err != nil {
		t.Fatal(err)
	}
	if dup, err := s.RecordReceipt(ctx, r); err != nil || dup {
		t.Fatalf("after release: duplicate = %v, err = %v", dup, err)
	}
	if dup, err := s.RecordReceipt(ctx, r); err != nil || !dup {
		t.Fatalf("redelivery: duplicate = %v, err = %v", dup, err)
	}
}

// ClaimReceipt: the first claim holds the receipt in progress; a second sees it with its payload
// hash; CompleteReceipt marks it done; a claim in progress past stale is taken over; a receipt
// RecordReceipt wrote (3.1 deduplication) reads as done; a completed receipt that is gone is not
// recreated.
func TestClaimReceipt(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	r := record.Receipt{SellerID: "seller-1", IdempotencyKey: "wh-claim-0001", PayloadHash: "h1"}
	if held, err := s.ClaimReceipt(ctx, r, 30*time.Second); err != nil || held != nil {
		t.Fatalf("first claim: %+v, %v", held, err)
	}
	held, err := s.ClaimReceipt(ctx, record.Receipt{SellerID: "seller-1", IdempotencyKey: "wh-claim-0001", PayloadHash: "h2"}, 30*time.Second)
	if err != nil || held == nil || held.Done || held.PayloadHash != "h1" {
		t.Fatalf("second claim while in progress: %+v, %v", held, err)
	}
	if err := s.CompleteReceipt(ctx, "seller-1", "wh-claim-0001"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute) // a done receipt is never taken over, however old
	if held, err := s.ClaimReceipt(ctx, r, 30*time.Second); err != nil || held == nil || !held.Done {
		t.Fatalf("claim after completion: %+v, %v", held, err)
	}

	abandoned := record.Receipt{SellerID: "seller-1", IdempotencyKey: "wh-claim-0002", PayloadHash: "h1"}
	if held, err := s.ClaimReceipt(ctx, abandoned, 30*time.Second); err != nil || held != nil {
		t.Fatalf("claim: %+v, %v", held, err)
	}
	clk.Advance(29 * time.Second)
	if held, err := s.ClaimReceipt(ctx, abandoned, 30*time.Second); err != nil || held == nil {
		t.Fatalf("a claim 29 s old was taken over: %+v, %v", held, err)
	}
	clk.Advance(2 * time.Second)
	if held, err := s.ClaimReceipt(ctx, abandoned, 30*time.Second); err != nil || held != nil {
		t.Fatalf("a claim 31 s old was not taken over: %+v, %v", held, err)
	}

	legacy := record.Receipt{SellerID: "seller-1", IdempotencyKey: "wh-claim-0003"}
	if dup, err := s.RecordReceipt(ctx, legacy); err != nil || dup {
		t.Fatalf("record: %v %v", dup, err)
	}
	clk.Advance(time.Hour)
	if held, err := s.ClaimReceipt(ctx, legacy, 30*time.Second); err != nil || held == nil || !held.Done {
		t.Fatalf("a 3.1 receipt: %+v, %v", held, err)
	}

	if err := s.ReleaseReceipt(ctx, "seller-1", "wh-claim-0002"); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteReceipt(ctx, "seller-1", "wh-claim-0002"); err != nil {
		t.Fatalf("completing a released receipt: %v", err)
	}
	if held, err := s.ClaimReceipt(ctx, abandoned, 30*time.Second); err != nil || held != nil {
		t.Fatalf("CompleteReceipt recreated a released receipt: %+v, %v", held, err)
	}
}

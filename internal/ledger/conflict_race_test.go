package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
)

// racingStore is a Store over a fresh table behind an endpoint that refuses racing writes as
// DynamoDB does, each transaction holding its items for hold, with operation op-1 created.
func racingStore(tb testing.TB, hold time.Duration) (*ledger.Store, *dynamotest.Conflicts) {
	tb.Helper()
	client, table, conflicts := dynamotest.StartConflicting(tb, hold)
	s := ledger.New(client, table)
	s.Now = clocktest.At(time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC)).Now
	if _, err := s.CreateOperation(context.Background(), newOp("op-1")); err != nil {
		tb.Fatal(err)
	}
	return s, conflicts
}

// Writers racing on one operation's partition, as a change request, the seller's webhook, the
// buy's own run and the delivery read do right after a buy completes: every transaction of the
// operation item and the buy state, and every single write to the operation item, through an
// endpoint that refuses racing writes as DynamoDB does (kumo alone never refuses any). No
// writer sees anything but its own answer (a change refused because another is in flight is
// the only refusal), and the partition ends exactly as the successful writes say. A write can
// still lose every one of its attempts when the machine is loaded (the endpoint's hold then
// stretches): it must answer ErrContention, which the API answers 409 concurrent_write, and
// have written nothing; the end of a change is retried then, as its workflow retries it.
func TestWritesThatLoseARaceAreSentAgain(t *testing.T) {
	if dynamotest.Current() == dynamotest.Moto {
		t.Skip(motoNotIsolated)
	}
	t.Parallel()
	s, conflicts := racingStore(t, 2*time.Millisecond)
	ctx := context.Background()

	const writers, rounds = 4, 10
	var (
		mu               sync.Mutex
		unexpected       []error
		begun, refusals  int
		updated, lost    int
		lastEnded        = map[string]bool{}
		wg               sync.WaitGroup
		expires          = s.Now().Add(13 * time.Hour)
		requested, ended = record.Event{Type: "modification_requested"}, record.Event{Type: "modification_ended"}
	)
	fail := func(what string, err error) {
		mu.Lock()
		unexpected = append(unexpected, fmt.Errorf("%s: %w", what, err))
		mu.Unlock()
	}
	// contended reports whether err is a race lost on every attempt, and counts it.
	contended := func(err error) bool {
		if !errors.Is(err, record.ErrContention) {
			return false
		}
		mu.Lock()
		lost++
		mu.Unlock()
		return true
	}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				reason := fmt.Sprintf("writer %d round %d", w, i)
				switch _, err := s.UpdateFields(ctx, "acme", "op-1", record.AnyVersion, record.Patch{Actor: "test", Reason: &reason}); {
				case err == nil:
					mu.Lock()
					updated++
					mu.Unlock()
				case !contended(err):
					fail("update fields", err)
				}
				if _, err := s.SetTaskToken(ctx, "acme", "op-1", fmt.Sprintf("tok-%d-%d", w, i)); err != nil && !contended(err) {
					fail("set task token", err)
				}
				id := fmt.Sprintf("chg-%d-%d", w, i)
				_, err := s.BeginChange(ctx, initialBuy(), id, "budget", expires, requested)
				if _, refused := errors.AsType[*record.ChangeRefusedError](err); refused {
					mu.Lock()
					refusals++
					mu.Unlock()
					continue
				}
				if contended(err) {
					continue
				}
				if err != nil {
					fail("begin change", err)
					continue
				}
				for range 20 {
					if _, err = s.EndChange(ctx, "acme", "op-1", id, "failed", "test", ended); !contended(err) {
						break
					}
				}
				if err != nil {
					fail("end change", err)
					continue
				}
				mu.Lock()
				begun++
				lastEnded[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range unexpected {
		t.Error(err)
	}
	if conflicts.Refused() == 0 {
		t.Fatal("no write was refused: the writers never raced, and nothing was tested")
	}
	t.Logf("%d writes refused as racing and sent again; %d changes begun and ended, %d refused while another was in flight; %d writes lost every attempt (ErrContention)",
		conflicts.Refused(), begun, refusals, lost)

	op, err := s.GetOperation(ctx, "acme", "op-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1 + updated); op.Version != want {
		t.Errorf("version %d, want %d: one per field update, each exactly once", op.Version, want)
	}
	st, err := s.GetBuyState(ctx, "acme", "op-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.ChangeID != "" || !lastEnded[st.LastChangeID] || st.LastOutcome != "failed" {
		t.Errorf("buy state %+v: want no change in flight and the last one ended", st)
	}
	counts := map[string]int{}
	for cursor := ""; ; {
		page, err := s.ListEvents(ctx, "acme", "op-1", record.MaxListLimit, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			counts[e.Type]++
		}
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	if counts[record.EventUpdate] != updated || counts[requested.Type] != begun || counts[ended.Type] != begun {
		t.Errorf("timeline %v: want %d updates and %d changes requested and ended, each exactly once", counts, updated, begun)
	}
}

package stage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Claims is the part of the ledger that counts the attempts setting out to send an intent;
// *ledger.Store satisfies it.
type Claims interface {
	ClaimIntent(ctx context.Context, seen *record.Intent) (*record.Intent, error)
	ReleaseIntent(ctx context.Context, claimed *record.Intent) error
}

// Intents is the part of the ledger write-ahead intents live in; *ledger.Store satisfies it.
type Intents interface {
	Claims
	PutIntent(ctx context.Context, in record.Intent) (*record.Intent, bool, error)
	GetIntent(ctx context.Context, tenant, operationID, task string) (*record.Intent, error)
}

// IntentRef names one write-ahead intent and says how its stored record reads.
type IntentRef struct {
	Tenant, OperationID string
	// Name is the intent's task name in the ledger; Tool is the AdCP task it sends.
	Name, Tool string
	// Decode reads a claimed record as what to send (Attempt aside). Nil reads the layout
	// FixIntent stores: the key, the request bytes and the time the intent was fixed. A use
	// case whose records predate that layout reads them its own way here.
	Decode func(stored *record.Intent) (adcp.Intent, error)
}

func (r IntentRef) decode(stored *record.Intent) (adcp.Intent, error) {
	if r.Decode != nil {
		return r.Decode(stored)
	}
	return StoredIntent(r.Tool, stored), nil
}

// StoredIntent reads a record in the layout FixIntent stores as the intent of tool it holds.
func StoredIntent(tool string, stored *record.Intent) adcp.Intent {
	return adcp.Intent{Task: tool, Key: stored.IdempotencyKey, Body: stored.Request, Created: stored.CreatedAt}
}

// Claimed is a write-ahead intent an attempt holds a claim on (ledger.ClaimIntent): Intent is
// what to send, with Attempt 0 when no send of it can have happened yet and 1 for a resend.
type Claimed struct {
	adcp.Intent
	stored *record.Intent
}

// Resend reports whether an earlier attempt may have sent the intent: the caller reconciles
// what it can first, and the AdCP client refuses a resend the agent's replay window does not
// cover.
func (c *Claimed) Resend() bool { return c.Attempt > 0 }

// claimRounds bounds how often an intent is read again after another attempt claimed it
// between the read and the claim.
const claimRounds = 3

// FixIntent returns the intent ref names, claimed for one send. The first attempt builds it
// and stores it write-ahead (the put is its claim); a later one claims the stored intent: a
// first send again when every earlier claim was released (ReleaseUnsent), else a resend. Key
// and bytes never change.
func FixIntent(ctx context.Context, l Intents, ref IntentRef, build func() (adcp.Intent, error)) (*Claimed, error) {
	return claim(ctx, l, ref, func(ctx context.Context) (*record.Intent, *Claimed, error) {
		stored, err := l.GetIntent(ctx, ref.Tenant, ref.OperationID, ref.Name)
		if err == nil {
			return stored, nil, nil
		}
		if !errors.Is(err, record.ErrNotFound) {
			return nil, nil, fmt.Errorf("stage: read intent %s of %s: %w", ref.Name, ref.OperationID, err)
		}
		in, err := build()
		if err != nil {
			return nil, nil, err
		}
		put := record.Intent{Tenant: ref.Tenant, OperationID: ref.OperationID, Task: ref.Name, IdempotencyKey: in.Key, Request: in.Body, CreatedAt: in.Created, Claims: 1}
		got, created, err := l.PutIntent(ctx, put)
		if err != nil {
			return nil, nil, fmt.Errorf("stage: store intent %s of %s: %w", ref.Name, ref.OperationID, err)
		}
		if created {
			return nil, &Claimed{Intent: in, stored: &put}, nil
		}
		return got, nil, nil // another attempt stored it first
	})
}

// ClaimStored claims, for one send, an intent its owner stored before any attempt (a
// campaign's plan, written with the campaign): read returns the record as it is stored now.
// The claim is a first send while nothing was sent, else a resend, as FixIntent's.
func ClaimStored(ctx context.Context, l Claims, ref IntentRef, read func(ctx context.Context) (*record.Intent, error)) (*Claimed, error) {
	return claim(ctx, l, ref, func(ctx context.Context) (*record.Intent, *Claimed, error) {
		stored, err := read(ctx)
		return stored, nil, err
	})
}

// claim claims what read returns: a stored record to claim, or an intent read just fixed
// (its put was the claim).
func claim(ctx context.Context, l Claims, ref IntentRef, read func(ctx context.Context) (*record.Intent, *Claimed, error)) (*Claimed, error) {
	for range claimRounds {
		stored, fixed, err := read(ctx)
		if err != nil || fixed != nil {
			return fixed, err
		}
		claimed, err := l.ClaimIntent(ctx, stored)
		if errors.Is(err, record.ErrConflict) {
			continue // another attempt claimed or released it since the read
		}
		if err != nil {
			return nil, fmt.Errorf("stage: claim intent %s of %s: %w", ref.Name, ref.OperationID, err)
		}
		in, err := ref.decode(claimed)
		if err != nil {
			// The claim stands: an unreadable record is never sent, and stays maybe sent.
			return nil, &workflow.TerminalError{Code: "bad_intent", Reason: fmt.Sprintf("intent %s of %s: %v", ref.Name, ref.OperationID, err)}
		}
		in.Attempt = 1
		if stored.Unsent {
			in.Attempt = 0
		}
		return &Claimed{Intent: in, stored: claimed}, nil
	}
	return nil, &workflow.TransientError{Reason: fmt.Sprintf("operation %s: intent %s claimed by concurrent attempts, retry", ref.OperationID, ref.Name)}
}

// ReleaseUnsent forgets the claim of a first send that provably sent nothing (adcp.NotSent:
// the agent's circuit breaker refused it, or the client failed before connecting), so that
// the next attempt sends the intent as a first send again: an agent without a replay window
// would refuse a resend for good. A resend's claim stays (an earlier one may have been sent),
// and so does a claim another attempt followed with its own. A failed release is logged: the
// intent then stays maybe sent, the safe side.
func ReleaseUnsent(ctx context.Context, l Claims, log *slog.Logger, operationID string, c *Claimed, callErr error) {
	if callErr == nil || c.Resend() || !adcp.NotSent(callErr) {
		return
	}
	if err := l.ReleaseIntent(ctx, c.stored); err != nil {
		log.WarnContext(ctx, "unsent intent kept as maybe sent", "operationId", operationID, "task", c.stored.Task, "err", err)
	}
}

// NewIntent fixes a mutating request for agentID in the AdCP version the agent speaks
// (adcp.Client.NewIntent), at the stage's clock. A failure to learn that version is the
// stage's like any call's (CallError: transient or terminal; a breaker's refusal stays an
// *adcp.UnavailableError for Unavailable); a request that cannot be encoded is terminal.
func (s *Stage) NewIntent(ctx context.Context, agentID, task string, req any) (adcp.Intent, error) {
	return BuildIntent(ctx, s.AdCP, agentID, task, req, s.Now())
}

// BuildIntent is Stage.NewIntent for a stage without a Stage (modify).
func BuildIntent(ctx context.Context, a interface {
	NewIntent(ctx context.Context, agentID, task string, req any, created time.Time) (adcp.Intent, error)
}, agentID, task string, req any, now time.Time) (adcp.Intent, error) {
	in, err := a.NewIntent(ctx, agentID, task, req, now)
	if err != nil {
		return adcp.Intent{}, IntentError(err)
	}
	return in, nil
}

// IntentError is the stage error of a failure to build an intent: an open breaker as it is
// (the caller waits), the agent's capabilities unread (the version is chosen from them) as a
// call error, anything else terminal.
func IntentError(err error) error {
	var ae *adcp.Error
	switch {
	case errors.As(err, new(*adcp.UnavailableError)):
		return err
	case errors.As(err, &ae):
		return CallError(adcp.ToolGetAdCPCapabilities+" (to choose the AdCP version)", err)
	}
	return &workflow.TerminalError{Code: "bad_intent", Reason: err.Error()}
}

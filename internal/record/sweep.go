package record

import (
	"errors"
	"time"
)

// Phases of a seller pass stored in SweepProgress.
const (
	PhaseList    = "list"    // reading list_tasks pages
	PhaseCompare = "compare" // comparing operations
)

// SweepProgress is where the reconciliation sweep's last run left a seller: the account group in progress, the phase, the
// seller's list cursor or the last operation compared, and when a pass last completed. The
// zero value means "start from the beginning".
type SweepProgress struct {
	Seller     string    `dynamodbav:"seller"`
	Account    string    `dynamodbav:"account,omitempty"`
	Phase      string    `dynamodbav:"phase,omitempty"`
	ListCursor string    `dynamodbav:"list_cursor,omitempty"`
	AfterOp    string    `dynamodbav:"after_op,omitempty"`
	LastPass   time.Time `dynamodbav:"last_pass,omitempty"`
	// NotBefore is set when the seller's retry_after reaches past the run that got it: no run
	// calls the seller before then.
	NotBefore time.Time `dynamodbav:"not_before,omitempty"`
	// Fence is the reconcile lease fence of the run that wrote it.
	Fence     int64     `dynamodbav:"fence"`
	UpdatedAt time.Time `dynamodbav:"updated_at"`
}

// ErrStaleFence reports a progress write by a run whose lease was taken over.
var ErrStaleFence = errors.New("record: sweep progress written under a newer lease")

// SweepHeartbeat is the reconciliation sweep's sign of life: the last run that read every
// pending operation stores it, and the stages that choose a buy's safety-net interval read
// it. While it is fresh the sweep notices a seller's progress within a run or two, so the
// per-buy net may wait until the seller's deadline (RunConfig.SweepNetSeconds); once it is
// stale the net falls back to its short interval (RunConfig.PollMaxSeconds).
type SweepHeartbeat struct {
	// At is when the run that stored it started.
	At time.Time `dynamodbav:"at,unixtime"`
	// Until is when it stops vouching for the sweep: At plus a few of the schedule's
	// periods, so that one slow or missed run does not shorten every buy's net.
	Until time.Time `dynamodbav:"until,unixtime"`
}

// Fresh reports whether the heartbeat still vouches for the sweep at now.
func (h SweepHeartbeat) Fresh(now time.Time) bool { return now.Before(h.Until) }

// SweepPlan is what the sweep's last planner run handed out: one shard per seller, each a
// worker's pass over that seller. Workers count themselves in Reported when their shard
// ends; the planner's next run vouches for the sweep (SweepHeartbeat) only when every shard
// of this plan reported.
type SweepPlan struct {
	ID string `dynamodbav:"id"`
	// At is when the planner run started.
	At time.Time `dynamodbav:"at"`
	// Shards is how many shards the plan handed out; Reported how many of them ended.
	Shards   int `dynamodbav:"shards"`
	Reported int `dynamodbav:"reported"`
	// Indexed is true when every pending operation was on the per-seller index when the plan
	// was made (its backfill done), so the shards read every one.
	Indexed bool `dynamodbav:"indexed,omitempty"`
}

// Complete reports whether every shard of the plan reported.
func (p SweepPlan) Complete() bool { return p.ID != "" && p.Reported >= p.Shards }

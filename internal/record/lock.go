package record

import (
	"fmt"
	"time"
)

// Lease is a held lock: Fence is the fencing token, strictly greater than every fence handed out
// before for the same lock name (within LockRetention of the last use). Pass it to whatever the
// lock protects so that a stale holder's writes can be refused.
type Lease struct {
	Name      string    `dynamodbav:"lock_name"`
	Owner     string    `dynamodbav:"owner"`
	Fence     int64     `dynamodbav:"fence"`
	ExpiresAt time.Time `dynamodbav:"-"`
	// Expiry is ExpiresAt in Unix milliseconds (the stored form).
	Expiry int64 `dynamodbav:"lease_expiry"`
}

// LockHeldError reports a lock held by someone else; Holder is the current lease.
type LockHeldError struct{ Holder Lease }

func (e *LockHeldError) Error() string {
	return fmt.Sprintf("record: lock %s is held by %s until %s", e.Holder.Name, e.Holder.Owner, e.Holder.ExpiresAt.Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *LockHeldError) Is(target error) bool { return target == ErrConflict }

// ErrLeaseLost reports a Renew or Release by a holder whose lease was taken over (or released).
// It matches ErrConflict.
var ErrLeaseLost = fmt.Errorf("%w: lease lost", ErrConflict)

// BusinessKeyLock names the lock that allows one active operation per (tenant, seller, PO number).
func BusinessKeyLock(tenant, sellerID, poNumber string) string {
	return "PO#" + tenant + "#" + sellerID + "#" + hashHex(poNumber)
}

// ReconcileLock names the per-seller reconciliation lease.
func ReconcileLock(sellerID string) string { return "RECONCILE#" + sellerID }

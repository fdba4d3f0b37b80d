package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

type claimItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	record.Claim
}

// Claim takes the tenant's idempotency key for a request whose payload hashes to payloadHash, in
// one conditional put (Powertools semantics):
//
//	attribute_not_exists(pk) OR ttl < :now OR (status = INPROGRESS AND in_progress_expiry < :now_ms)
//
// with ReturnValuesOnConditionCheckFailure ALL_OLD (or a consistent read when the stand-in does
// not return the item). On success the claim is INPROGRESS and owned by the caller. On conflict:
// *PayloadMismatchError if the live record has another payload hash, else *ClaimExistsError with
// the live record.
func (s *Store) Claim(ctx context.Context, tenant, idempotencyKey, payloadHash string) (*record.Claim, error) {
	if err := checkID("tenant", tenant); err != nil {
		return nil, err
	}
	if idempotencyKey == "" || len(idempotencyKey) > 255 || payloadHash == "" {
		return nil, fmt.Errorf("%w: idempotency key must be 1-255 bytes and the payload hash set", record.ErrInvalidArgument)
	}
	now := s.now()
	c := record.Claim{
		Tenant: tenant, Key: idempotencyKey, Status: record.ClaimInProgress, PayloadHash: payloadHash,
		Owner: s.NewID(), Expiry: now.Add(s.ClaimTTL).Unix(),
		InProgressExpiry: now.Add(s.InProgressTTL).UnixMilli(), CreatedAt: now,
	}
	k := key(claimPK(tenant, idempotencyKey), skClaim)
	av, err := attributevalue.MarshalMap(claimItem{PK: claimPK(tenant, idempotencyKey), SK: skClaim, Claim: c})
	if err != nil {
		return nil, fmt.Errorf("ledger: encode claim: %w", err)
	}
	cond := expression.Or(
		keyFree(),
		expression.Name(AttrTTL).LessThan(expression.Value(now.Unix())),
		expression.Name(attrStatus).Equal(expression.Value(string(record.ClaimInProgress))).
			And(expression.Name("in_progress_expiry").LessThan(expression.Value(now.UnixMilli()))))
	err = s.putIf(ctx, av, cond)
	if err == nil {
		return &c, nil
	}
	failed, old := conditionFailed(err)
	if !failed {
		return nil, fmt.Errorf("ledger: claim idempotency key: %w", err)
	}
	item, err := s.oldOrRead(ctx, old, k)
	if errors.Is(err, record.ErrNotFound) {
		// Deleted (released) between our write and our read: the caller may simply try again.
		return nil, fmt.Errorf("ledger: claim idempotency key: released concurrently: %w", record.ErrContention)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: claim idempotency key: read existing: %w", err)
	}
	var existing claimItem
	if err := attributevalue.UnmarshalMap(item, &existing); err != nil {
		return nil, fmt.Errorf("ledger: decode claim: %w", err)
	}
	if existing.Owner == c.Owner {
		// Our own put, retried by the SDK after its response was lost (owners are random).
		return &c, nil
	}
	if existing.PayloadHash != payloadHash {
		return nil, &record.PayloadMismatchError{Existing: &existing.Claim}
	}
	return nil, &record.ClaimExistsError{Existing: &existing.Claim}
}

// CompleteClaim marks the caller's INPROGRESS claim COMPLETED with the operation id and the
// response to replay; it fails with ErrConflict if the claim is no longer the caller's (it lapsed
// and was reclaimed, or was released).
func (s *Store) CompleteClaim(ctx context.Context, c *record.Claim, operationID string, response json.RawMessage) error {
	up := expression.Set(expression.Name(attrStatus), expression.Value(string(record.ClaimCompleted))).
		Set(expression.Name("operation_id"), expression.Value(operationID)).
		Set(expression.Name("response"), expression.Value([]byte(response))).
		Remove(expression.Name("in_progress_expiry"))
	k := key(claimPK(c.Tenant, c.Key), skClaim)
	_, err := s.update(ctx, k, ownClaim(c), up, "")
	if err != nil {
		failed, old := conditionFailed(err)
		if !failed {
			return fmt.Errorf("ledger: complete claim: %w", err)
		}
		// Completed by this very call, retried by the SDK after its response was lost?
		item, rerr := s.oldOrRead(ctx, old, k)
		var cur claimItem
		if rerr != nil || attributevalue.UnmarshalMap(item, &cur) != nil ||
			cur.Owner != c.Owner || cur.Status != record.ClaimCompleted || cur.OperationID != operationID {
			return fmt.Errorf("ledger: complete claim: no longer ours: %w", record.ErrConflict)
		}
	}
	c.Status, c.OperationID, c.Response, c.InProgressExpiry = record.ClaimCompleted, operationID, response, 0
	return nil
}

// ReleaseClaim deletes the caller's INPROGRESS claim after a failure, so that a retry can run; it
// fails with ErrConflict if the claim is no longer the caller's.
func (s *Store) ReleaseClaim(ctx context.Context, c *record.Claim) error {
	err := s.deleteItem(ctx, key(claimPK(c.Tenant, c.Key), skClaim), ownClaim(c))
	if err != nil {
		failed, _ := conditionFailed(err)
		if !failed {
			return fmt.Errorf("ledger: release claim: %w", err)
		}
		// Gone: released by this very call, retried by the SDK after its response was lost (or
		// expired); either way nothing holds the key for us any more.
		if _, rerr := s.getItem(ctx, key(claimPK(c.Tenant, c.Key), skClaim)); errors.Is(rerr, record.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("ledger: release claim: no longer ours: %w", record.ErrConflict)
	}
	return nil
}

func ownClaim(c *record.Claim) expression.ConditionBuilder {
	return expression.Name("owner").Equal(expression.Value(c.Owner)).
		And(expression.Name(attrStatus).Equal(expression.Value(string(record.ClaimInProgress))))
}

type receiptItem struct {
	PK  string `dynamodbav:"pk"`
	SK  string `dynamodbav:"sk"`
	TTL int64  `dynamodbav:"ttl"`
	// Writer is random per put: a failed condition on an item that carries our writer is our
	// own put, retried by the SDK after its response was lost, not a duplicate.
	Writer string `dynamodbav:"writer"`
	// ClaimedAt (Unix seconds) is when ClaimReceipt took the receipt, in a number a condition
	// can compare; receipts RecordReceipt writes have none and are never taken over.
	ClaimedAt int64 `dynamodbav:"claimed_at,omitempty"`
	record.Receipt
}

// ClaimReceipt records a webhook delivery's receipt, in progress, before any side effect, and
// returns nil when this call holds it: no live receipt for (seller, idempotency key) existed,
// or the one that did is still in progress after stale (its holder died between the claim and
// CompleteReceipt or ReleaseReceipt: the delivery is taken over). Otherwise it returns the
// receipt held, whose Done and PayloadHash decide the answer: 2xx done, 503 in progress, 409 a
// different payload (AdCP 3.2's retry rules). A receipt RecordReceipt wrote reads as done.
func (s *Store) ClaimReceipt(ctx context.Context, r record.Receipt, stale time.Duration) (*record.Receipt, error) {
	if err := checkID("seller id", r.SellerID); err != nil {
		return nil, err
	}
	if r.IdempotencyKey == "" {
		return nil, fmt.Errorf("%w: empty webhook idempotency key", record.ErrInvalidArgument)
	}
	now := s.now()
	if r.ReceivedAt.IsZero() {
		r.ReceivedAt = now
	}
	r.Done = false
	k := key(receiptPK(r.SellerID, r.IdempotencyKey), skReceipt)
	w := s.NewID()
	av, err := attributevalue.MarshalMap(receiptItem{PK: receiptPK(r.SellerID, r.IdempotencyKey), SK: skReceipt,
		TTL: now.Add(max(s.ReceiptTTL, minReceiptTTL)).Unix(), Writer: w, ClaimedAt: now.Unix(), Receipt: r})
	if err != nil {
		return nil, fmt.Errorf("ledger: claim webhook receipt: encode: %w", err)
	}
	abandoned := expression.AttributeExists(expression.Name("claimed_at")).
		And(expression.AttributeNotExists(expression.Name("done"))).
		And(expression.Name("claimed_at").LessThan(expression.Value(now.Add(-stale).Unix())))
	cond := keyFree().Or(expression.Name(AttrTTL).LessThan(expression.Value(now.Unix()))).Or(abandoned)
	err = s.putIf(ctx, av, cond)
	if err == nil {
		return nil, nil
	}
	failed, old := conditionFailed(err)
	if !failed {
		return nil, fmt.Errorf("ledger: claim webhook receipt from %s: %w", r.SellerID, err)
	}
	cur, err := s.oldOrRead(ctx, old, k)
	if errors.Is(err, record.ErrNotFound) {
		// Held a moment ago, released since (its delivery failed): in progress again for the
		// seller's next retry, which finds it free.
		return &record.Receipt{SellerID: r.SellerID, IdempotencyKey: r.IdempotencyKey, PayloadHash: r.PayloadHash}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: claim webhook receipt from %s: read existing: %w", r.SellerID, err)
	}
	var held receiptItem
	if err := attributevalue.UnmarshalMap(cur, &held); err != nil {
		return nil, fmt.Errorf("ledger: claim webhook receipt from %s: decode: %w", r.SellerID, err)
	}
	if held.Writer == w {
		return nil, nil // our own put, retried by the SDK after its response was lost
	}
	if held.ClaimedAt == 0 {
		held.Done = true // written by RecordReceipt: deduplicated the 3.1 way
	}
	return &held.Receipt, nil
}

// CompleteReceipt marks the receipt of (sellerID, idempotencyKey) done once its delivery's
// effects are recorded, so a retry is answered 2xx. A receipt that is gone (released, expired)
// is not recreated.
func (s *Store) CompleteReceipt(ctx context.Context, sellerID, idempotencyKey string) error {
	if err := checkID("seller id", sellerID); err != nil {
		return err
	}
	_, err := s.update(ctx, key(receiptPK(sellerID, idempotencyKey), skReceipt), expression.AttributeExists(expression.Name(AttrPK)),
		expression.Set(expression.Name("done"), expression.Value(true)), types.ReturnValueNone)
	if failed, _ := conditionFailed(err); failed {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: complete webhook receipt from %s: %w", sellerID, err)
	}
	return nil
}

// RecordReceipt stores the receipt of a webhook before any side effect, with
// attribute_not_exists(pk) OR ttl < :now (TTL deletes lazily), kept for ReceiptTTL (at least 24 h).
// duplicate is true when a live receipt for (seller, idempotency key) already exists; the caller
// answers 2xx and does nothing else.
func (s *Store) RecordReceipt(ctx context.Context, r record.Receipt) (duplicate bool, err error) {
	if err := checkID("seller id", r.SellerID); err != nil {
		return false, err
	}
	if r.IdempotencyKey == "" {
		return false, fmt.Errorf("%w: empty webhook idempotency key", record.ErrInvalidArgument)
	}
	now := s.now()
	if r.ReceivedAt.IsZero() {
		r.ReceivedAt = now
	}
	ttl := s.ReceiptTTL
	if ttl < minReceiptTTL {
		ttl = minReceiptTTL
	}
	w := s.NewID()
	dup, err := s.putOnce(ctx, receiptItem{
		PK: receiptPK(r.SellerID, r.IdempotencyKey), SK: skReceipt, TTL: now.Add(ttl).Unix(), Writer: w, Receipt: r,
	}, key(receiptPK(r.SellerID, r.IdempotencyKey), skReceipt), w, now)
	if err != nil {
		return false, fmt.Errorf("ledger: record webhook receipt from %s: %w", r.SellerID, err)
	}
	return dup, nil
}

// ReleaseReceipt deletes the receipt of (sellerID, idempotencyKey) so that the seller's retry
// is applied again: the webhook receiver calls it when the update could not be recorded after
// the receipt was written.
func (s *Store) ReleaseReceipt(ctx context.Context, sellerID, idempotencyKey string) error {
	if err := checkID("seller id", sellerID); err != nil {
		return err
	}
	if err := s.deleteItem(ctx, key(receiptPK(sellerID, idempotencyKey), skReceipt)); err != nil {
		return fmt.Errorf("ledger: release webhook receipt from %s: %w", sellerID, err)
	}
	return nil
}

type nonceItem struct {
	PK     string `dynamodbav:"pk"`
	SK     string `dynamodbav:"sk"`
	TTL    int64  `dynamodbav:"ttl"`
	KeyID  string `dynamodbav:"key_id"`
	Writer string `dynamodbav:"writer"` // as receiptItem.Writer
}

// SeenNonce records the RFC 9421 nonce of signing key keyID until until (the signature's
// expiry) and reports whether it was already recorded and still live (a replay).
func (s *Store) SeenNonce(ctx context.Context, keyID, nonce string, until time.Time) (bool, error) {
	if keyID == "" || nonce == "" {
		return false, fmt.Errorf("%w: key id and nonce are required", record.ErrInvalidArgument)
	}
	now := s.now()
	exp := until.Unix()
	if exp <= now.Unix() {
		exp = now.Unix() + 1
	}
	w := s.NewID()
	seen, err := s.putOnce(ctx, nonceItem{PK: nonceKey(keyID, nonce), SK: skNonce, TTL: exp, KeyID: keyID, Writer: w},
		key(nonceKey(keyID, nonce), skNonce), w, now)
	if err != nil {
		return false, fmt.Errorf("ledger: record nonce of key %s: %w", keyID, err)
	}
	return seen, nil
}

// putOnce puts item (stored under k, with writer in its "writer" attribute) unless a live item
// (ttl not passed) holds its key; it reports whether one did. An item holding our writer is our
// own put, retried by the SDK after its response was lost: not a duplicate.
func (s *Store) putOnce(ctx context.Context, item any, k map[string]types.AttributeValue, writer string, now time.Time) (exists bool, err error) {
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		return false, fmt.Errorf("encode: %w", err)
	}
	cond := keyFree().
		Or(expression.Name(AttrTTL).LessThan(expression.Value(now.Unix())))
	err = s.putIf(ctx, av, cond)
	if err == nil {
		return false, nil
	}
	failed, old := conditionFailed(err)
	if !failed {
		return false, err
	}
	cur, err := s.oldOrRead(ctx, old, k)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return true, nil // held a moment ago, released since: still not ours to record
	case err != nil:
		return false, fmt.Errorf("read existing: %w", err)
	}
	var held struct {
		Writer string `dynamodbav:"writer"`
	}
	if attributevalue.UnmarshalMap(cur, &held) == nil && held.Writer == writer {
		return false, nil
	}
	return true, nil
}

// Seen is SeenNonce under the name the webhook package's ReplayStore interface uses.
func (s *Store) Seen(ctx context.Context, keyID, nonce string, until time.Time) (bool, error) {
	return s.SeenNonce(ctx, keyID, nonce, until)
}

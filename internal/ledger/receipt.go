package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

type receiptItem struct {
	PK  string `dynamodbav:"pk"`
	SK  string `dynamodbav:"sk"`
	TTL int64  `dynamodbav:"ttl"`
	// Writer is random per put: a failed condition on an item that carries our writer is our
	// own put, retried by the SDK after its response was lost, not a duplicate.
	Writer string `dynamodbav:"writer"`
	record.Receipt
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
	_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: key(receiptPK(sellerID, idempotencyKey), skReceipt),
	})
	if err != nil {
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

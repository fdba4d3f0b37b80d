package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

// API is the part of the DynamoDB client the ledger uses; *dynamodb.Client satisfies it and tests
// fake it with function types.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Defaults for the Store's durations.
const (
	DefaultClaimTTL      = 24 * time.Hour
	DefaultInProgressTTL = 60 * time.Second
	defaultReceiptTTL    = 48 * time.Hour
	minReceiptTTL        = 24 * time.Hour
	defaultLockRetention = 7 * 24 * time.Hour
	maxListRounds        = 10
	maxIDLength          = 256
)

// Store is the ledger: every read and write of the buyflow table. Its zero value is not usable;
// build it with New and adjust the exported fields before first use.
type Store struct {
	api   API
	table string
	seq   atomic.Int64
	// opOwners spares LocateOperation the index read for an operation it has found before.
	opOwners opOwners

	// Now is the clock (UTC is applied on every use).
	Now func() time.Time
	// NewID returns random identifiers (claim owners, event key suffixes).
	NewID func() string
	// ClaimTTL is how long an idempotency claim is kept (and a COMPLETED response replayed).
	ClaimTTL time.Duration
	// InProgressTTL is how long an INPROGRESS claim blocks others before it may be reclaimed.
	InProgressTTL time.Duration
	// ReceiptTTL is how long webhook receipts are kept for deduplication (at least MinReceiptTTL).
	ReceiptTTL time.Duration
	// LockRetention is how long a released or expired lock item is kept (with its fence) before
	// TTL may delete it.
	LockRetention time.Duration
}

// New returns a Store over the table named table, with the system clock and default durations.
// On an emulator, api is a client with EmulatorCompat.
func New(api API, table string) *Store {
	return &Store{
		api:           retryConflicts(api),
		table:         table,
		Now:           time.Now,
		NewID:         randomID,
		ClaimTTL:      DefaultClaimTTL,
		InProgressTTL: DefaultInProgressTTL,
		ReceiptTTL:    defaultReceiptTTL,
		LockRetention: defaultLockRetention,
	}
}

// Table returns the name of the table the store uses.
func (s *Store) Table() string { return s.table }

func (s *Store) now() time.Time { return s.Now().UTC() }

// checkID refuses empty, over-long or '#'-bearing identifiers: '#' separates key segments, so
// allowing it would let one tenant's key spell another's.
func checkID(what, v string) error {
	if v == "" || len(v) > maxIDLength || strings.Contains(v, "#") {
		return fmt.Errorf("%w: %s %q must be 1-%d bytes without '#'", record.ErrInvalidArgument, what, v, maxIDLength)
	}
	return nil
}

// checkOp checks the tenant and the id of an operation whose items are read or written.
func checkOp(tenant, opID string) error {
	if err := checkID("tenant", tenant); err != nil {
		return err
	}
	return checkID("operation id", opID)
}

// Key layout. Every tenant-owned item lives under "TENANT#<tenant>#...".
const (
	skOperation = "OP"
	skClaim     = "IDEM"
	skLock      = "LOCK"
	skReceipt   = "RECEIPT"
	skNonce     = "NONCE"
	skApproval  = "APPROVAL"
	skIntentPfx = "INTENT#"
	skEventPfx  = "EV#"
	tenantPfx   = "TENANT#"
	pendingPfx  = "PENDING#"
	// timeKey is a fixed-width, lexically sortable UTC timestamp (RFC3339 with nanoseconds).
	timeKey = "2006-01-02T15:04:05.000000000Z"
)

func tenantPrefix(tenant string) string   { return tenantPfx + tenant + "#" }
func opPK(tenant, id string) string       { return tenantPrefix(tenant) + "OP#" + id }
func claimPK(tenant, key string) string   { return tenantPrefix(tenant) + "IDEM#" + hashHex(key) }
func lockPK(name string) string           { return "LOCK#" + name }
func approvalPK(id string) string         { return "APPROVAL#" + id }
func tenantGSI(tenant string) string      { return tenantPfx + tenant }
func pendingGSI(st string) string         { return pendingPfx + st }
func nonceKey(keyID, nonce string) string { return "NONCE#" + hashHex(keyID+"\x00"+nonce) }
func receiptPK(seller, key string) string {
	return "RECEIPT#" + hashHex(seller+"\x00"+key)
}

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: pk},
		AttrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

func fmtTime(t time.Time) string { return t.UTC().Format(timeKey) }

// conditionFailed reports whether err is a failed condition, and returns the old item if
// DynamoDB sent it (ALL_OLD); local stand-ins never do, so callers fall back to a consistent read.
func conditionFailed(err error) (bool, map[string]types.AttributeValue) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true, ccf.Item
	}
	return false, nil
}

// wroteLast reports whether item was last written by the write that left id in its last_write:
// a conditional put refused by its own item is that put, retried by the SDK after its
// response was lost, and succeeded.
func wroteLast(item map[string]types.AttributeValue, id string) bool {
	var mark struct {
		LastWrite string `dynamodbav:"last_write"`
	}
	return attributevalue.UnmarshalMap(item, &mark) == nil && mark.LastWrite == id
}

// getItem reads one item with a consistent read; a missing item is ErrNotFound.
func (s *Store) getItem(ctx context.Context, k map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            k,
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, record.ErrNotFound
	}
	return out.Item, nil
}

// getOpItem reads the item sk of the tenant's operation opID (getItem); what names it in errors.
func (s *Store) getOpItem(ctx context.Context, tenant, opID, sk, what string) (map[string]types.AttributeValue, error) {
	if err := checkOp(tenant, opID); err != nil {
		return nil, err
	}
	item, err := s.getItem(ctx, key(opPK(tenant, opID), sk))
	if err != nil {
		return nil, fmt.Errorf("ledger: get %s: %w", what, err)
	}
	return item, nil
}

// oldOrRead returns the item from a failed condition when DynamoDB sent it, or reads it.
func (s *Store) oldOrRead(ctx context.Context, old, k map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	if len(old) > 0 {
		return old, nil
	}
	return s.getItem(ctx, k)
}

// update applies up to item k under cond in one UpdateItem and returns the item as updated when
// ret is types.ReturnValueAllNew. A failed condition asks for the item as it was (ALL_OLD), which
// conditionFailed returns.
func (s *Store) update(ctx context.Context, k map[string]types.AttributeValue, cond expression.ConditionBuilder, up expression.UpdateBuilder, ret types.ReturnValue) (map[string]types.AttributeValue, error) {
	e, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(up))
	if err != nil {
		return nil, err
	}
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: k,
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValues:                        ret,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return nil, err
	}
	return out.Attributes, nil
}

// deleteItem deletes item k, under cond when one is given.
func (s *Store) deleteItem(ctx context.Context, k map[string]types.AttributeValue, cond ...expression.ConditionBuilder) error {
	in := &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: k}
	if len(cond) > 0 {
		e, err := build(expression.NewBuilder().WithCondition(cond[0]))
		if err != nil {
			return err
		}
		in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.Condition(), e.Names(), e.Values()
	}
	_, err := s.api.DeleteItem(ctx, in)
	return err
}

// putIf puts item under cond in one PutItem; a failed condition asks for the item as it was
// (ALL_OLD), which conditionFailed returns.
func (s *Store) putIf(ctx context.Context, item map[string]types.AttributeValue, cond expression.ConditionBuilder) error {
	e, err := build(expression.NewBuilder().WithCondition(cond))
	if err != nil {
		return err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item, ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// keyFree is the condition of a put that must not replace an item.
func keyFree() expression.ConditionBuilder {
	return expression.AttributeNotExists(expression.Name(AttrPK))
}

// query is one Query of the table, or of its index when index is set: e's key condition (and
// filter), at most limit items from start, newest first when backward, consistent when asked.
type query struct {
	index      string
	e          expression.Expression
	limit      int
	start      map[string]types.AttributeValue
	backward   bool
	consistent bool
}

func (s *Store) query(ctx context.Context, q query) (*dynamodb.QueryOutput, error) {
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: q.e.KeyCondition(), FilterExpression: q.e.Filter(),
		ExpressionAttributeNames: q.e.Names(), ExpressionAttributeValues: q.e.Values(),
		Limit: aws.Int32(int32(q.limit)), ExclusiveStartKey: q.start,
	}
	if q.index != "" {
		in.IndexName = aws.String(q.index)
	}
	if q.backward {
		in.ScanIndexForward = aws.Bool(false)
	}
	if q.consistent {
		in.ConsistentRead = aws.Bool(true)
	}
	return s.api.Query(ctx, in)
}

// build finishes an expression builder, wrapping its (programming) errors.
func build(b expression.Builder) (expression.Expression, error) {
	e, err := b.Build()
	if err != nil {
		return e, fmt.Errorf("ledger: build expression: %w", err)
	}
	return e, nil
}

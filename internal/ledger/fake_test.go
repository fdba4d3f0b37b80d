package ledger

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// fakeAPI is a hand-written fake: each test sets the calls it expects; any other call fails.
type fakeAPI struct {
	t        *testing.T
	put      func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
	transact func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
	get      func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
}

var _ API = (*fakeAPI)(nil)

func (f *fakeAPI) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if f.put == nil {
		f.t.Fatal("unexpected PutItem")
	}
	return f.put(in)
}

func (f *fakeAPI) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if f.transact == nil {
		f.t.Fatal("unexpected TransactWriteItems")
	}
	return f.transact(in)
}

func (f *fakeAPI) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if f.get == nil {
		f.t.Fatal("unexpected GetItem")
	}
	return f.get(in)
}

func (f *fakeAPI) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.t.Fatal("unexpected UpdateItem")
	return nil, nil
}

func (f *fakeAPI) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	f.t.Fatal("unexpected DeleteItem")
	return nil, nil
}

func (f *fakeAPI) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	f.t.Fatal("unexpected Scan")
	return nil, nil
}

func (f *fakeAPI) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	f.t.Fatal("unexpected Query")
	return nil, nil
}

var placeholderRE = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// readable substitutes names and values into expr so a test can compare it with what a person
// would write.
func readable(t *testing.T, expr *string, names map[string]string, values map[string]types.AttributeValue) string {
	t.Helper()
	if expr == nil {
		return ""
	}
	out := placeholderRE.ReplaceAllStringFunc(*expr, func(p string) string {
		if p[0] == '#' {
			if n, ok := names[p]; ok {
				return n
			}
			t.Fatalf("undefined name %s in %q", p, *expr)
		}
		v, ok := values[p]
		if !ok {
			t.Fatalf("undefined value %s in %q", p, *expr)
		}
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			return fmt.Sprintf("%q", v.Value)
		case *types.AttributeValueMemberN:
			return v.Value
		}
		return fmt.Sprintf("%T", v)
	})
	return strings.Join(strings.Fields(out), " ")
}

var fixedNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func fakeStore(f *fakeAPI) *Store {
	s := New(f, "ledger")
	s.Now = func() time.Time { return fixedNow }
	s.NewID = func() string { return "id-1" }
	return s
}

func TestClaimWritesPowertoolsCondition(t *testing.T) {
	old := claimItem{PK: "x", SK: skClaim, Claim: record.Claim{Status: record.ClaimCompleted, PayloadHash: "h", OperationID: "op-9", Owner: "other"}}
	oldAV, err := attributevalue.MarshalMap(old)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		putErr  error
		wantErr func(error) bool
	}{
		{"claimed", nil, func(err error) bool { return err == nil }},
		{"conflict carries the old record without a second read", &types.ConditionalCheckFailedException{Item: oldAV},
			func(err error) bool {
				var ce *record.ClaimExistsError
				return errors.As(err, &ce) && ce.Existing.OperationID == "op-9"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAPI{t: t}
			f.put = func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				got := readable(t, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
				want := fmt.Sprintf(`(attribute_not_exists (pk)) OR (ttl < %d) OR ((status = "INPROGRESS") AND (in_progress_expiry < %d))`,
					fixedNow.Unix(), fixedNow.UnixMilli())
				if got != want {
					t.Errorf("condition\n got %s\nwant %s", got, want)
				}
				if in.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
					t.Errorf("ReturnValuesOnConditionCheckFailure = %q", in.ReturnValuesOnConditionCheckFailure)
				}
				var it claimItem
				if err := attributevalue.UnmarshalMap(in.Item, &it); err != nil {
					t.Fatal(err)
				}
				if it.PK != claimPK("acme", "key") || it.Expiry != fixedNow.Add(DefaultClaimTTL).Unix() ||
					it.InProgressExpiry != fixedNow.Add(DefaultInProgressTTL).UnixMilli() || it.Status != record.ClaimInProgress {
					t.Errorf("item %+v", it)
				}
				return &dynamodb.PutItemOutput{}, tt.putErr
			}
			_, err := fakeStore(f).Claim(context.Background(), "acme", "key", "h")
			if !tt.wantErr(err) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestTransitionConditionAndConflictMapping(t *testing.T) {
	current, err := attributevalue.MarshalMap(opItem{PK: opPK("acme", "op-1"), SK: skOperation,
		Operation: record.Operation{ID: "op-1", Tenant: "acme", Status: workflow.StatusCompleted, Version: 7}})
	if err != nil {
		t.Fatal(err)
	}
	canceled := func(code string, item map[string]types.AttributeValue) error {
		return &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
			{Code: aws.String(code), Item: item}, {Code: aws.String("None")},
		}}
	}
	tests := []struct {
		name  string
		err   error
		check func(t *testing.T, err error)
	}{
		{"terminal, from the item in the cancellation reason", canceled("ConditionalCheckFailed", current), func(t *testing.T, err error) {
			var te *record.TransitionError
			if !errors.As(err, &te) || te.Kind != record.ConflictTerminal || te.Current.Version != 7 {
				t.Fatalf("err = %v", err)
			}
		}},
		{"transaction conflict is contention", canceled("TransactionConflict", nil), func(t *testing.T, err error) {
			if !errors.Is(err, record.ErrContention) {
				t.Fatalf("err = %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAPI{t: t}
			f.transact = func(in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
				if len(in.TransactItems) != 2 || in.TransactItems[0].Update == nil || in.TransactItems[1].Put == nil {
					t.Fatalf("transaction items: %+v", in.TransactItems)
				}
				u := in.TransactItems[0].Update
				cond := readable(t, u.ConditionExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues)
				wantCond := `(status IN ("creating", "submitted", "working", "input_required")) AND (version = 6)`
				if cond != wantCond {
					t.Errorf("condition\n got %s\nwant %s", cond, wantCond)
				}
				up := readable(t, u.UpdateExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues)
				for _, part := range []string{`gsi1pk = "LIVE"`, `status = "completed"`, "version = version + 1", `media_buy_id = "mb-1"`} {
					if !strings.Contains(up, part) {
						t.Errorf("update %q lacks %q", up, part)
					}
				}
				p := in.TransactItems[1].Put
				if c := readable(t, p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues); c != "attribute_not_exists (pk)" {
					t.Errorf("event condition %q", c)
				}
				return nil, tt.err
			}
			_, err := fakeStore(f).Transition(context.Background(), "acme", "op-1", workflow.StatusCompleted, 6,
				record.Patch{MediaBuyID: aws.String("mb-1")})
			tt.check(t, err)
		})
	}
}

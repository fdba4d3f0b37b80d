package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/dynamoretry"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
)

// Key layout in the ledger table. Every agent lives in one partition, so a cold start reads
// the whole registry with one Query (one page up to 1 MB: about 2,000 agents).
const (
	partition   = "AGENTS"
	skAgentPfx  = "AGENT#"
	skEventPfx  = "EV#"
	attrDoc     = "doc"
	attrVersion = "version"
	// attrWrite holds a random id of the write that stored the agent: a write that finds the
	// agent changed recognises by it that the change is its own (see write).
	attrWrite = "last_write"
	timeKey   = "2006-01-02T15:04:05.000000000Z"
)

// API is the part of the DynamoDB client the store uses; *dynamodb.Client satisfies it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Event is one entry of an agent's audit trail: who changed what, when.
type Event struct {
	At      time.Time `json:"at"`
	AgentID string    `json:"agent_id"`
	// Action is added, seeded, updated, disabled, enabled or capabilities.
	Action string `json:"action"`
	// Actor is the caller's IAM principal, "deploy" for the CDK seed, "system" for the schedule.
	Actor   string `json:"actor"`
	Version int64  `json:"version"`
	// Detail says what changed (the fields, the reason).
	Detail string `json:"detail,omitempty"`
}

// Audit actions.
const (
	ActionAdded        = "added"
	ActionSeeded       = "seeded"
	ActionUpdated      = "updated"
	ActionDisabled     = "disabled"
	ActionEnabled      = "enabled"
	ActionCapabilities = "capabilities"
)

// Store is the registry in the ledger table. Every change is a transaction of the agent's
// conditional write and its audit event, so no change is ever unrecorded.
//
// Its writes follow the ledger's rules (see the ledger package): a transaction that lost a race
// on its items is sent again by dynamoretry, and a race still lost after that is
// record.ErrContention; a transaction the SDK sent again after its response was lost, which
// DynamoDB answers from its ClientRequestToken but the emulators run again, fails its own
// condition and is recognised by its write id as the success it was.
type Store struct {
	api     API
	table   string
	retrier dynamoretry.Retrier
	// Now is the clock.
	Now func() time.Time
	// NewWriteID returns the random id each write leaves on the agent.
	NewWriteID func() string
}

// NewStore returns the registry in table.
func NewStore(api API, table string) *Store {
	return &Store{api: api, table: table, retrier: dynamoretry.Retrier{Contention: record.ErrContention}, Now: time.Now, NewWriteID: uuid.NewString}
}

func agentKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		ledger.AttrPK: &types.AttributeValueMemberS{Value: partition},
		ledger.AttrSK: &types.AttributeValueMemberS{Value: skAgentPfx + id},
	}
}

// List returns every agent, sorted by id (a consistent read: a change is seen at once).
func (s *Store) List(ctx context.Context) ([]Record, error) {
	docs, err := s.docs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(docs))
	for _, d := range docs {
		var r Record
		if err := json.Unmarshal([]byte(d.doc), &r); err != nil {
			return nil, fmt.Errorf("registry: decode stored agent %s: %w", d.id, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Documents returns every agent's stored document by id, undecoded: a function's cold start
// reads the whole registry but decodes only the agents it uses (decoding 500 agents was a
// third of the load's CPU).
func (s *Store) Documents(ctx context.Context) (map[string]string, error) {
	docs, err := s.docs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(docs))
	for _, d := range docs {
		out[d.id] = d.doc
	}
	return out, nil
}

// Document returns one agent's stored document, undecoded, or an error wrapping ErrUnknown.
func (s *Store) Document(ctx context.Context, id string) (string, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: agentKey(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", fmt.Errorf("registry: get %s: %w", id, err)
	}
	doc, ok := out.Item[attrDoc].(*types.AttributeValueMemberS)
	if !ok {
		return "", fmt.Errorf("%w %q", ErrUnknown, id)
	}
	return doc.Value, nil
}

type storedDoc struct{ id, doc string }

// docs reads every agent item, in key (id) order.
func (s *Store) docs(ctx context.Context) ([]storedDoc, error) {
	var out []storedDoc
	err := s.query(ctx, skAgentPfx, func(it map[string]types.AttributeValue) error {
		sk, _ := it[ledger.AttrSK].(*types.AttributeValueMemberS)
		doc, ok := it[attrDoc].(*types.AttributeValueMemberS)
		if sk == nil || !ok {
			return errors.New("registry: stored item has no key or document")
		}
		out = append(out, storedDoc{id: strings.TrimPrefix(sk.Value, skAgentPfx), doc: doc.Value})
		return nil
	})
	return out, err
}

// query calls each for every item of the registry's partition whose sort key starts with
// prefix, in key order, page after page (consistent reads: a change is seen at once).
func (s *Store) query(ctx context.Context, prefix string, each func(map[string]types.AttributeValue) error) error {
	var start map[string]types.AttributeValue
	for {
		page, err := s.api.Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(s.table),
			KeyConditionExpression: aws.String("#pk = :pk AND begins_with(#sk, :pfx)"),
			ExpressionAttributeNames: map[string]string{
				"#pk": ledger.AttrPK, "#sk": ledger.AttrSK,
			},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": &types.AttributeValueMemberS{Value: partition}, ":pfx": &types.AttributeValueMemberS{Value: prefix},
			},
			ConsistentRead:    aws.Bool(true),
			ExclusiveStartKey: start,
		})
		if err != nil {
			return fmt.Errorf("registry: query %s: %w", prefix, err)
		}
		for _, it := range page.Items {
			if err := each(it); err != nil {
				return err
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return nil
		}
		start = page.LastEvaluatedKey
	}
}

// Get returns one agent, or an error wrapping ErrUnknown.
func (s *Store) Get(ctx context.Context, id string) (Record, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: agentKey(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Record{}, fmt.Errorf("registry: get %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return Record{}, fmt.Errorf("%w %q", ErrUnknown, id)
	}
	return decodeRecord(out.Item)
}

// Add stores a new agent (version 1) and its audit event; an id already taken is ErrExists.
// The caller has validated it.
func (s *Store) Add(ctx context.Context, r Record, actor, action string) (Record, error) {
	now := s.Now().UTC()
	r.Version, r.CreatedAt, r.UpdatedAt, r.UpdatedBy = 1, now, now, actor
	err := s.write(ctx, r, 0, Event{At: now, AgentID: r.ID, Action: action, Actor: actor, Version: 1, Detail: "role " + string(r.Role) + ", " + r.MCPURL})
	if errors.Is(err, ErrConflict) {
		return Record{}, fmt.Errorf("%w: %s", ErrExists, r.ID)
	}
	return r, err
}

// Change is one change of an agent: change edits a copy of the current record and describes
// what it did (the audit detail); an error from it aborts the change.
type Change func(r *Record) (action, detail string, err error)

// Update applies change to the current record and writes it conditioned on the version read,
// with its audit event. A concurrent change makes it read and apply again (at most 3 times).
// validate, when not nil, checks the changed record before anything is written.
func (s *Store) Update(ctx context.Context, id, actor string, change Change, validate func(Record) error) (Record, error) {
	for range 3 {
		cur, err := s.Get(ctx, id)
		if err != nil {
			return Record{}, err
		}
		next := cur
		next.Agent = cloneAgent(cur.Agent)
		action, detail, err := change(&next)
		if err != nil {
			return Record{}, err
		}
		next.ID = id // the id is the key: never changed
		if validate != nil {
			if err := validate(next); err != nil {
				return Record{}, err
			}
		}
		now := s.Now().UTC()
		next.Version, next.UpdatedAt, next.CreatedAt = cur.Version+1, now, cur.CreatedAt
		if action != ActionCapabilities {
			next.UpdatedBy = actor
		}
		err = s.write(ctx, next, cur.Version, Event{At: now, AgentID: id, Action: action, Actor: actor, Version: next.Version, Detail: detail})
		if errors.Is(err, ErrConflict) {
			continue
		}
		return next, err
	}
	return Record{}, fmt.Errorf("%w: %s", ErrConflict, id)
}

// Seed adds the agents of a deployment's seed (the CDK context's agents document) that the
// registry does not have yet; agents it has are left as operators changed them. It returns
// the ids it added.
func (s *Store) Seed(ctx context.Context, seed []adcp.Agent, actor string) ([]string, error) {
	var added []string
	for _, a := range seed {
		_, err := s.Add(ctx, Record{Agent: a}, actor, ActionSeeded)
		switch {
		case errors.Is(err, ErrExists):
		case err != nil:
			return added, err
		default:
			added = append(added, a.ID)
		}
	}
	return added, nil
}

// History returns an agent's audit trail, oldest first.
func (s *Store) History(ctx context.Context, id string) ([]Event, error) {
	var out []Event
	err := s.query(ctx, skEventPfx+id+"#", func(it map[string]types.AttributeValue) error {
		var ev Event
		if err := decodeDoc(it, &ev); err != nil {
			return err
		}
		out = append(out, ev)
		return nil
	})
	return out, err
}

// write puts r, conditioned on the stored version being prev (0: no agent yet), together with
// ev. A failed condition is ErrConflict, unless the agent stored is this very write's (a resend
// of it after a lost response): that is its success.
func (s *Store) write(ctx context.Context, r Record, prev int64, ev Event) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("registry: encode %s: %w", r.ID, err)
	}
	evDoc, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("registry: encode event: %w", err)
	}
	writeID := s.NewWriteID()
	item := agentKey(r.ID)
	item[attrDoc] = &types.AttributeValueMemberS{Value: string(doc)}
	item[attrVersion] = &types.AttributeValueMemberN{Value: strconv.FormatInt(r.Version, 10)}
	item[attrWrite] = &types.AttributeValueMemberS{Value: writeID}
	put := &types.Put{TableName: aws.String(s.table), Item: item, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	if prev == 0 {
		put.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		put.ExpressionAttributeNames = map[string]string{"#pk": ledger.AttrPK}
	} else {
		put.ConditionExpression = aws.String("#v = :v")
		put.ExpressionAttributeNames = map[string]string{"#v": attrVersion}
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.FormatInt(prev, 10)}}
	}
	evItem := map[string]types.AttributeValue{
		ledger.AttrPK: &types.AttributeValueMemberS{Value: partition},
		ledger.AttrSK: &types.AttributeValueMemberS{Value: skEventPfx + r.ID + "#" + ev.At.UTC().Format(timeKey) + "#" + uuid.NewString()},
		attrDoc:       &types.AttributeValueMemberS{Value: string(evDoc)},
	}
	_, err = dynamoretry.TransactWriteItems(ctx, s.retrier, s.api, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: put},
		{Put: &types.Put{TableName: aws.String(s.table), Item: evItem,
			ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": ledger.AttrPK}}},
	}})
	if err == nil {
		return nil
	}
	old, failed := conditionFailed(err)
	if !failed {
		return fmt.Errorf("registry: write %s: %w", r.ID, err)
	}
	if old == nil {
		// DynamoDB returns the item whose condition failed; kumo and moto return none.
		got, rerr := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: agentKey(r.ID), ConsistentRead: aws.Bool(true)})
		if rerr != nil {
			return fmt.Errorf("registry: write %s: read the agent after a failed condition: %w", r.ID, rerr)
		}
		old = got.Item
	}
	if stored, ok := old[attrWrite].(*types.AttributeValueMemberS); ok && stored.Value == writeID {
		return nil // this very write, applied already
	}
	return ErrConflict
}

// conditionFailed reports whether err is a cancellation of the registry's transaction that
// names a failed condition, with the agent's item when DynamoDB returned it. Only the agent's
// condition can fail for another writer's sake (the event's key is random), and a resend of
// this write fails both.
func conditionFailed(err error) (agent map[string]types.AttributeValue, failed bool) {
	tce, ok := errors.AsType[*types.TransactionCanceledException](err)
	if !ok {
		return nil, false
	}
	if len(tce.CancellationReasons) == 0 {
		// Some stand-ins carry the reasons only in the message.
		return nil, strings.Contains(tce.ErrorMessage(), dynamoretry.ReasonConditionalCheck)
	}
	for i, reason := range tce.CancellationReasons {
		if aws.ToString(reason.Code) == dynamoretry.ReasonConditionalCheck {
			failed = true
			if i == 0 {
				agent = reason.Item
			}
		}
	}
	return agent, failed
}

func decodeRecord(item map[string]types.AttributeValue) (Record, error) {
	var r Record
	if err := decodeDoc(item, &r); err != nil {
		return Record{}, err
	}
	return r, nil
}

func decodeDoc(item map[string]types.AttributeValue, v any) error {
	doc, ok := item[attrDoc].(*types.AttributeValueMemberS)
	if !ok {
		return errors.New("registry: stored item has no document")
	}
	if err := json.Unmarshal([]byte(doc.Value), v); err != nil {
		return fmt.Errorf("registry: decode stored item: %w", err)
	}
	return nil
}

// cloneAgent copies the agent's webhook and auth settings, so a change edits its own copy.
func cloneAgent(a adcp.Agent) adcp.Agent {
	if a.Auth != nil {
		au := *a.Auth
		au.Scopes = append([]string(nil), a.Auth.Scopes...)
		a.Auth = &au
	}
	if a.Webhook != nil {
		w := *a.Webhook
		w.JWKS = append(json.RawMessage(nil), a.Webhook.JWKS...)
		a.Webhook = &w
	}
	return a
}

// Agent returns agent id's AdCP configuration read straight from the table (no cache): the
// operator API probes an agent the moment it is stored. It satisfies adcp.Agents.
func (s *Store) Agent(ctx context.Context, id string) (adcp.Agent, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return adcp.Agent{}, err
	}
	return r.Agent, nil
}

var _ adcp.Agents = (*Store)(nil)

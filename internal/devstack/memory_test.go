package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/sivchari/kumo"

	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/statusevent"
)

// TestLedgerTableHasNoKumoStream holds the ledger table kumo hosts to no DynamoDB stream of its
// own: kumo keeps every record of one for as long as the stack runs, and the ledger stream is
// the stack's tap (streams.go), so each write would only add images nobody reads. The table
// keeps the rest of the schema: a write and a read of an item work, TTL is on.
func TestLedgerTableHasNoKumoStream(t *testing.T) {
	emu := kumo.NewServer()
	defer emu.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ddb, _, _, _ := (&Stack{}).newClients(emu.URL)
	const table = "memory-test-ledger"
	if err := createLedgerTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{
		ledger.AttrPK: &types.AttributeValueMemberS{Value: "TENANT#t"},
		ledger.AttrSK: &types.AttributeValueMemberS{Value: "OP#1"},
	}
	item := map[string]types.AttributeValue{"payload": &types.AttributeValueMemberS{Value: "x"}}
	for k, v := range key {
		item[k] = v
	}
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
	got, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item["payload"] == nil {
		t.Fatalf("read back the item: %v, %v", got, err)
	}
	desc, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if arn := aws.ToString(desc.Table.LatestStreamArn); arn != "" {
		t.Errorf("kumo keeps a stream of the ledger table (%s): every write would add records nobody reads", arn)
	}
	if s := desc.Table.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		t.Errorf("the ledger table's stream is enabled in kumo: %+v", s)
	}
	ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != ledger.AttrTTL {
		t.Errorf("TTL is not on %s: %+v", ledger.AttrTTL, d)
	}
}

// TestEventSinkKeepsTheLastEvents holds the sink to its bound: of max+1 status events it keeps
// the newest max, in arrival order, and of malformed deliveries the newest maxSinkMalformed.
func TestEventSinkKeepsTheLastEvents(t *testing.T) {
	const max = 3
	sink := newEventSink(max)
	deliver := func(body []byte) {
		t.Helper()
		rec := httptest.NewRecorder()
		sink.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body)))
		if rec.Code != http.StatusNoContent {
			t.Fatalf("delivery answered %d", rec.Code)
		}
	}
	for seq := int64(1); seq <= max+1; seq++ {
		body, err := json.Marshal(statusevent.Event{
			ID: "e", Source: statusevent.Source, DetailType: statusevent.DetailTypeMediaBuy, Time: time.Now(),
			Detail: statusevent.Detail{
				SchemaVersion: statusevent.SchemaVersion, Kind: statusevent.KindMediaBuy, OperationID: "mb-1", Tenant: "t",
				Sequence: seq, To: "requested", EventID: statusevent.EventID(statusevent.KindMediaBuy, "mb-1", seq),
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		deliver(body)
	}
	var seqs []int64
	for _, ev := range sink.Events() {
		seqs = append(seqs, ev.Detail.Sequence)
	}
	if want := []int64{2, 3, 4}; !slices.Equal(seqs, want) {
		t.Errorf("kept events %v, want the newest %d: %v", seqs, max, want)
	}
	for i := range maxSinkMalformed + 1 {
		deliver([]byte(fmt.Sprintf(`{"not":"an event %d"}`, i)))
	}
	bad := sink.Malformed()
	if len(bad) != maxSinkMalformed || string(bad[0]) != `{"not":"an event 1"}` {
		t.Errorf("kept %d malformed deliveries from %s, want the newest %d", len(bad), bad[0], maxSinkMalformed)
	}
}

// A GET of the sink answers one operation's events (what `buyflow smoke --events` reads from
// outside the stack's process), deduplicated and in sequence order, and is not a delivery.
func TestEventSinkAnswersAnOperationsEvents(t *testing.T) {
	sink := newEventSink(10)
	for _, seq := range []int64{2, 1, 2} {
		body, err := json.Marshal(statusevent.Event{
			ID: "e", Source: statusevent.Source, DetailType: statusevent.DetailTypeMediaBuy, Time: time.Now(),
			Detail: statusevent.Detail{SchemaVersion: statusevent.SchemaVersion, Kind: statusevent.KindMediaBuy, OperationID: "mb-1", Tenant: "t",
				Sequence: seq, To: "requested", EventID: statusevent.EventID(statusevent.KindMediaBuy, "mb-1", seq)},
		})
		if err != nil {
			t.Fatal(err)
		}
		sink.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body)))
	}
	get := func(q string) (int, []statusevent.Event) {
		rec := httptest.NewRecorder()
		sink.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/events"+q, nil))
		var evs []statusevent.Event
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &evs); err != nil {
				t.Fatalf("GET %s: %v: %s", q, err, rec.Body)
			}
		}
		return rec.Code, evs
	}
	if code, evs := get("?operation_id=mb-1"); code != http.StatusOK || len(evs) != 2 || evs[0].Detail.Sequence != 1 {
		t.Errorf("GET mb-1: %d %+v", code, evs)
	}
	if code, evs := get("?operation_id=mb-2"); code != http.StatusOK || evs == nil || len(evs) != 0 {
		t.Errorf("GET mb-2: %d %v, want 200 and []", code, evs)
	}
	if code, _ := get(""); code != http.StatusBadRequest {
		t.Errorf("GET without an operation id: %d, want 400", code)
	}
	if n := len(sink.Events()) + len(sink.Malformed()); n != 3 {
		t.Errorf("the sink holds %d deliveries after the GETs, want the 3 POSTs", n)
	}
}

// TestTraceKeepsTheLastEvents holds the trace to its bound, as the sink above.
func TestTraceKeepsTheLastEvents(t *testing.T) {
	tr := newTrace(2)
	for _, id := range []string{"a", "b", "c"} {
		tr.add(TraceEvent{Kind: TraceInvoke, OperationID: id})
	}
	var ids []string
	for _, e := range tr.Events() {
		ids = append(ids, e.OperationID)
	}
	if !slices.Equal(ids, []string{"b", "c"}) {
		t.Errorf("kept %v, want [b c]", ids)
	}
}

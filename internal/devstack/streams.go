package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/topology"
)

// The ledger stream, emulated. kumo v0.33.1 records stream records for PutItem, UpdateItem and
// DeleteItem but none for TransactWriteItems (every ledger transition is one), and it stores
// event source mappings without ever running them. The stack therefore taps the table's writes
// in the emulator proxy, which every function's AWS calls pass: a write to the table is run
// alone (the tap holds a lock around it), with a consistent read of each item it names before
// and after, and every item it changed becomes one record, in commit order, with its new and
// old images (the table's NEW_AND_OLD_IMAGES stream). Only the items whose keys the mapping's
// filter pattern keeps are tapped: the others' records would be dropped unseen. The mapping's emulation then does what
// Lambda's does with topology.App.LedgerStream: the filter pattern, batches of BatchSize
// within MaxBatchingWindowSeconds, one batch at a time, a batch that fails retried (from the
// first failed record when the function reports batch item failures) up to RetryAttempts,
// then its records dropped to the failure list (the failure queue on AWS).

// streamRecord is one record in the Lambda event form of a DynamoDB stream.
type streamRecord struct {
	EventID        string       `json:"eventID"`
	EventName      string       `json:"eventName"`
	EventVersion   string       `json:"eventVersion"`
	EventSource    string       `json:"eventSource"`
	AWSRegion      string       `json:"awsRegion"`
	EventSourceARN string       `json:"eventSourceARN"`
	DynamoDB       streamChange `json:"dynamodb"`
}

type streamChange struct {
	ApproximateCreationDateTime int64                      `json:"ApproximateCreationDateTime"`
	Keys                        map[string]json.RawMessage `json:"Keys"`
	NewImage                    map[string]json.RawMessage `json:"NewImage,omitempty"`
	OldImage                    map[string]json.RawMessage `json:"OldImage,omitempty"`
	SequenceNumber              string                     `json:"SequenceNumber"`
	SizeBytes                   int                        `json:"SizeBytes"`
	StreamViewType              string                     `json:"StreamViewType"`
}

// ledgerStream is the tap and the queue of records the mapping has not taken yet.
type ledgerStream struct {
	table, arn, kumo string
	http             *http.Client
	// keyPattern is the part of the mapping's filter pattern on an item's keys (dynamodb.Keys),
	// nil when it has none. No record of an item whose keys it rejects could reach the
	// function, so the tap leaves such writes alone: the receipts, replay nonces and timeline
	// events a webhook writes go to kumo without the lock and the two reads each.
	keyPattern map[string]any

	write sync.Mutex // one table write at a time, with its before and after reads

	mu      sync.Mutex
	seq     int64
	records []streamRecord
	wake    chan struct{}
}

func newLedgerStream(kumo, table string, src topology.StreamSource) *ledgerStream {
	s := &ledgerStream{
		table: table, kumo: kumo, http: &http.Client{Timeout: 30 * time.Second},
		arn:  "arn:aws:dynamodb:" + region + ":000000000000:table/" + table + "/stream/local",
		wake: make(chan struct{}, 1),
	}
	var filter struct {
		DynamoDB struct {
			Keys map[string]any `json:"Keys"`
		} `json:"dynamodb"`
	}
	// A pattern that does not parse keeps every record: the mapping refuses it with its error.
	if json.Unmarshal([]byte(src.FilterPattern), &filter) == nil && checkExactPattern(filter.DynamoDB.Keys) == nil {
		s.keyPattern = filter.DynamoDB.Keys
	}
	return s
}

// mayPass reports whether a record of the item with key k could pass the mapping's filter.
func (s *ledgerStream) mayPass(k map[string]json.RawMessage) bool {
	if s.keyPattern == nil {
		return true
	}
	decoded := make(map[string]any, len(k))
	for name, v := range k {
		var d any
		if json.Unmarshal(v, &d) != nil {
			return true // not ours to judge: tapped, and the mapping's filter decides
		}
		decoded[name] = d
	}
	return matches(s.keyPattern, decoded)
}

// dynamoWrites are the DynamoDB actions that change items.
var dynamoWrites = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "TransactWriteItems": true, "BatchWriteItem": true}

// tap serves one DynamoDB write through forward and records the items it changed in the
// ledger table. It reports false for a request that is not a write to the table (forward it
// as is).
func (s *ledgerStream) tap(w http.ResponseWriter, r *http.Request, forward http.Handler) bool {
	action, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	if !ok || !dynamoWrites[action] {
		return false
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close() // replaced below
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false // the forwarded call fails the same way
	}
	keys := s.keysOf(action, body)
	if len(keys) == 0 {
		return false
	}
	s.write.Lock()
	defer s.write.Unlock()
	ctx := r.Context()
	before := make([]map[string]json.RawMessage, len(keys))
	for i, k := range keys {
		if before[i], err = s.getItem(ctx, k); err != nil {
			http.Error(w, "local stack: ledger stream: "+err.Error(), http.StatusInternalServerError)
			return true
		}
	}
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	forward.ServeHTTP(rec, r)
	if rec.status != http.StatusOK {
		return true
	}
	for i, k := range keys {
		after, err := s.getItem(context.WithoutCancel(ctx), k)
		if err != nil {
			log.Printf("local stack: ledger stream: read after a write: %v", err)
			continue
		}
		s.add(k, before[i], after)
	}
	return true
}

// keysOf returns the keys of the table's items the write names, in request order, once each.
func (s *ledgerStream) keysOf(action string, body []byte) []map[string]json.RawMessage {
	type item struct {
		TableName string                     `json:"TableName"`
		Item      map[string]json.RawMessage `json:"Item"`
		Key       map[string]json.RawMessage `json:"Key"`
	}
	var req struct {
		item
		TransactItems []struct {
			Put, Update, Delete *item
		} `json:"TransactItems"`
		RequestItems map[string][]struct {
			PutRequest    *item `json:"PutRequest"`
			DeleteRequest *item `json:"DeleteRequest"`
		} `json:"RequestItems"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var out []map[string]json.RawMessage
	seen := map[string]bool{}
	addKey := func(table string, it *item) {
		if it == nil || table != s.table {
			return
		}
		src := it.Key
		if src == nil {
			src = it.Item
		}
		k := map[string]json.RawMessage{ledger.AttrPK: src[ledger.AttrPK], ledger.AttrSK: src[ledger.AttrSK]}
		id := string(k[ledger.AttrPK]) + "\x00" + string(k[ledger.AttrSK])
		if k[ledger.AttrPK] == nil || seen[id] || !s.mayPass(k) {
			return
		}
		seen[id] = true
		out = append(out, k)
	}
	switch action {
	case "TransactWriteItems":
		for _, t := range req.TransactItems {
			for _, it := range []*item{t.Put, t.Update, t.Delete} {
				if it != nil {
					addKey(it.TableName, it)
				}
			}
		}
	case "BatchWriteItem":
		for _, w := range req.RequestItems[s.table] {
			addKey(s.table, w.PutRequest)
			addKey(s.table, w.DeleteRequest)
		}
	default:
		addKey(req.TableName, &req.item)
	}
	return out
}

// getItem reads one item of the table from kumo, consistently (nil when there is none).
func (s *ledgerStream) getItem(ctx context.Context, key map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	body, err := json.Marshal(map[string]any{"TableName": s.table, "Key": key, "ConsistentRead": true})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.kumo+"/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20260101/"+region+"/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer discard(resp)
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get item: %s: %s", resp.Status, bytes.TrimSpace(raw))
	}
	var out struct {
		Item map[string]json.RawMessage `json:"Item"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out.Item, nil
}

// add records the change of one item, if it changed.
func (s *ledgerStream) add(key, before, after map[string]json.RawMessage) {
	name := "MODIFY"
	switch {
	case before == nil && after == nil:
		return
	case before == nil:
		name = "INSERT"
	case after == nil:
		name = "REMOVE"
	case sameImage(before, after):
		return
	}
	s.mu.Lock()
	s.seq++
	seq := fmt.Sprintf("%021d", s.seq)
	size := 0
	for _, img := range []map[string]json.RawMessage{key, before, after} {
		for k, v := range img {
			size += len(k) + len(v)
		}
	}
	s.records = append(s.records, streamRecord{
		EventID: seq, EventName: name, EventVersion: "1.1", EventSource: "aws:dynamodb", AWSRegion: region, EventSourceARN: s.arn,
		DynamoDB: streamChange{
			ApproximateCreationDateTime: time.Now().Unix(), Keys: key, NewImage: after, OldImage: before,
			SequenceNumber: seq, SizeBytes: size, StreamViewType: "NEW_AND_OLD_IMAGES",
		},
	})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// sameImage compares two images attribute by attribute (kumo writes each in one canonical
// form, so equal values have equal bytes).
func sameImage(a, b map[string]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// statusRecorder passes a response on and keeps its status.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// streamMapping is the emulated event source mapping of the ledger stream to one function.
type streamMapping struct {
	stream  *ledgerStream
	src     topology.StreamSource
	filter  map[string]any
	invoke  func(ctx context.Context, payload []byte) (functionErr bool, out []byte, err error)
	logf    func(format string, args ...any)
	backoff time.Duration

	mu     sync.Mutex
	failed []streamRecord // what the failure queue would hold on AWS
}

func newStreamMapping(stream *ledgerStream, src topology.StreamSource, invoke func(context.Context, []byte) (bool, []byte, error), logf func(string, ...any)) (*streamMapping, error) {
	var filter map[string]any
	if err := json.Unmarshal([]byte(src.FilterPattern), &filter); err != nil {
		return nil, fmt.Errorf("devstack: the ledger stream's filter pattern: %w", err)
	}
	if err := checkExactPattern(filter); err != nil {
		return nil, fmt.Errorf("devstack: the ledger stream's filter pattern: %w", err)
	}
	return &streamMapping{stream: stream, src: src, filter: filter, invoke: invoke, logf: logf, backoff: 200 * time.Millisecond}, nil
}

// checkExactPattern accepts the part of Lambda's filter syntax this emulation evaluates:
// nested objects ending in arrays of exact string values.
func checkExactPattern(p map[string]any) error {
	for k, v := range p {
		switch v := v.(type) {
		case map[string]any:
			if err := checkExactPattern(v); err != nil {
				return err
			}
		case []any:
			for _, e := range v {
				if _, ok := e.(string); !ok {
					return fmt.Errorf("%s: only exact string values are emulated, not %v", k, e)
				}
			}
		default:
			return fmt.Errorf("%s: %v is neither an object nor an array of values", k, v)
		}
	}
	return nil
}

// matches evaluates an exact-value pattern on a record (decoded from its JSON).
func matches(pattern map[string]any, v any) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k, want := range pattern {
		got, present := obj[k]
		if !present {
			return false
		}
		switch want := want.(type) {
		case map[string]any:
			if !matches(want, got) {
				return false
			}
		case []any:
			s, ok := got.(string)
			if !ok || !containsAny(want, s) {
				return false
			}
		}
	}
	return true
}

func containsAny(values []any, s string) bool {
	for _, v := range values {
		if v == s {
			return true
		}
	}
	return false
}

// take waits for records and returns the next batch that passes the filter: up to BatchSize,
// gathered for up to the batching window after the first.
func (m *streamMapping) take(ctx context.Context) ([]streamRecord, bool) {
	var batch []streamRecord
	var deadline <-chan time.Time
	for {
		m.stream.mu.Lock()
		for len(m.stream.records) > 0 && len(batch) < m.src.BatchSize {
			r := m.stream.records[0]
			m.stream.records = m.stream.records[1:]
			if m.passes(r) {
				batch = append(batch, r)
			}
		}
		m.stream.mu.Unlock()
		if len(batch) >= m.src.BatchSize {
			return batch, true
		}
		if len(batch) > 0 && deadline == nil {
			deadline = time.After(time.Duration(m.src.MaxBatchingWindowSeconds) * time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-m.stream.wake:
		case <-deadline:
			return batch, true
		}
	}
}

func (m *streamMapping) passes(r streamRecord) bool {
	raw, err := json.Marshal(r)
	if err != nil {
		return false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	return matches(m.filter, v)
}

// run delivers batches until ctx ends.
func (m *streamMapping) run(ctx context.Context) {
	for {
		batch, ok := m.take(ctx)
		if !ok {
			return
		}
		m.deliver(ctx, batch)
	}
}

// deliver invokes the function with batch until it takes every record, retrying from the first
// record it reports failed; after RetryAttempts retries what is left goes to the failure list.
func (m *streamMapping) deliver(ctx context.Context, batch []streamRecord) {
	for attempt := 0; len(batch) > 0; attempt++ {
		if attempt > m.src.RetryAttempts {
			m.logf("ledger stream: %d records not delivered after %d retries, kept as failures (the failure queue on AWS)", len(batch), m.src.RetryAttempts)
			m.mu.Lock()
			m.failed = append(m.failed, batch...)
			m.mu.Unlock()
			return
		}
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(m.backoff):
			}
		}
		payload, err := json.Marshal(map[string]any{"Records": batch})
		if err != nil {
			m.logf("ledger stream: encode a batch: %v", err)
			return
		}
		fnErr, out, err := m.invoke(ctx, payload)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil || fnErr:
			m.logf("ledger stream: the batch failed (function error %v, %v); retried", fnErr, err)
			continue
		}
		var resp struct {
			BatchItemFailures []struct {
				ItemIdentifier string `json:"itemIdentifier"`
			} `json:"batchItemFailures"`
		}
		if json.Unmarshal(out, &resp) != nil || len(resp.BatchItemFailures) == 0 {
			return
		}
		batch = fromFirstFailure(batch, resp.BatchItemFailures[0].ItemIdentifier)
	}
}

// fromFirstFailure returns the records from the one with the lowest reported sequence number
// on (all of them for an identifier the batch does not hold, as Lambda does).
func fromFirstFailure(batch []streamRecord, id string) []streamRecord {
	for i, r := range batch {
		if r.DynamoDB.SequenceNumber == id {
			return batch[i:]
		}
	}
	return batch
}

// Failed returns the records the mapping gave up on.
func (m *streamMapping) Failed() []streamRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]streamRecord(nil), m.failed...)
}

// errNoStreamFunction reports a topology without the function the ledger stream invokes.
var errNoStreamFunction = errors.New("devstack: no function reads the ledger stream")

// streamFunction names the function the ledger stream invokes.
func streamFunction() (string, error) {
	for _, f := range topology.App.Functions {
		if f.ReadsLedgerStream {
			return f.Name, nil
		}
	}
	return "", errNoStreamFunction
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

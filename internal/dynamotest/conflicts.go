package dynamotest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buyflow/buyflow/internal/ledger"
)

// Conflicts is a DynamoDB endpoint in front of the stand-in that refuses racing writes the way
// DynamoDB does, which kumo never does: kumo runs every write under one lock, so two writes to
// one item never overlap and neither is ever refused. DynamoDB instead refuses, and applies
// nothing of,
//   - a TransactWriteItems that names an item another TransactWriteItems is writing at that
//     moment: TransactionCanceledException, reason TransactionConflict at that item, None at
//     the others;
//   - a PutItem, UpdateItem or DeleteItem on an item a TransactWriteItems is writing:
//     TransactionConflictException.
//
// Both are answered in DynamoDB's wire form, so the SDK decodes them into its own types. A
// transaction is "being written" from its arrival until the stand-in answered it, plus Hold:
// the stand-in answers in well under a millisecond, and Hold widens the window to what a
// transaction across partitions takes on DynamoDB, so that racing writers meet in it.
//
// It also loses responses on request (LoseResponses): the write is applied and the connection
// reset before its answer, the way a network loses one. The SDK sends such a write again with
// the same ClientRequestToken; DynamoDB would answer a repeated transaction from its first
// outcome, the stand-in runs it again, so a write that does not recognise its own earlier
// success fails its own condition.
type Conflicts struct {
	// Hold is how long a transaction's items stay busy before it is forwarded.
	Hold time.Duration

	next     http.Handler
	mu       sync.Mutex
	busy     map[string]bool // table \x00 pk \x00 sk of the items transactions are writing
	refused  atomic.Int64
	accepted atomic.Int64
	toLose   atomic.Int64
	lost     atomic.Int64
}

// StartConflicting is Start with the client's requests passing through a Conflicts in front
// of the stand-in; the Conflicts counts what it refused. The table is Start's.
func StartConflicting(t testing.TB, hold time.Duration) (*dynamodb.Client, string, *Conflicts) {
	t.Helper()
	direct, table := Start(t)
	backend, err := url.Parse(aws.ToString(direct.Options().BaseEndpoint))
	if err != nil {
		t.Fatalf("dynamotest: endpoint: %v", err)
	}
	c := &Conflicts{Hold: hold, next: httputil.NewSingleHostReverseProxy(backend), busy: map[string]bool{}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return clientOf(srv.URL), table, c
}

// Refused returns how many writes the endpoint refused as DynamoDB would have.
func (c *Conflicts) Refused() int64 { return c.refused.Load() }

// Accepted returns how many writes it passed on to the stand-in.
func (c *Conflicts) Accepted() int64 { return c.accepted.Load() }

// LoseResponses makes the next n writes lose their responses: each is applied by the
// stand-in, then the connection is reset before the answer reaches the client.
func (c *Conflicts) LoseResponses(n int) { c.toLose.Store(int64(n)) }

// Lost returns how many responses the endpoint lost.
func (c *Conflicts) Lost() int64 { return c.lost.Load() }

// writeRequest is the part of a write request that names items.
type writeRequest struct {
	TableName     string            `json:"TableName"`
	Item          map[string]any    `json:"Item"`
	Key           map[string]any    `json:"Key"`
	TransactItems []json.RawMessage `json:"TransactItems"`
}

func (c *Conflicts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	action, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	if action != "TransactWriteItems" && action != "PutItem" && action != "UpdateItem" && action != "DeleteItem" {
		c.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req writeRequest
	if json.Unmarshal(body, &req) != nil {
		c.next.ServeHTTP(w, r) // the stand-in answers the malformed request
		return
	}
	if action != "TransactWriteItems" {
		c.mu.Lock()
		taken := c.busy[itemID(req.TableName, req)]
		c.mu.Unlock()
		if taken {
			c.refused.Add(1)
			refuse(w, "TransactionConflictException", map[string]any{"message": "Transaction is ongoing for the item"})
			return
		}
		c.accepted.Add(1)
		c.forward(w, r)
		return
	}
	ids := make([]string, len(req.TransactItems))
	for i, raw := range req.TransactItems {
		var act map[string]writeRequest // {"Put": {...}} and the like
		if json.Unmarshal(raw, &act) != nil {
			c.next.ServeHTTP(w, r)
			return
		}
		for _, it := range act {
			ids[i] = itemID(it.TableName, it)
		}
	}
	c.mu.Lock()
	codes, conflict := make([]map[string]string, len(ids)), false
	for i, id := range ids {
		codes[i] = map[string]string{"Code": "None"}
		if c.busy[id] {
			codes[i] = map[string]string{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
			conflict = true
		}
	}
	if !conflict {
		for _, id := range ids {
			c.busy[id] = true
		}
	}
	c.mu.Unlock()
	if conflict {
		c.refused.Add(1)
		list := make([]string, len(codes))
		for i, code := range codes {
			list[i] = code["Code"]
		}
		refuse(w, "TransactionCanceledException", map[string]any{
			"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(list, ", ") + "]",
			"CancellationReasons": codes,
		})
		return
	}
	defer func() {
		c.mu.Lock()
		for _, id := range ids {
			delete(c.busy, id)
		}
		c.mu.Unlock()
	}()
	time.Sleep(c.Hold)
	c.accepted.Add(1)
	c.forward(w, r)
}

// forward passes an accepted write to the stand-in and its answer back, unless the write is to
// lose its response: then the stand-in applies it and the client's connection is reset (a TCP
// RST, which the SDK's standard retryer takes for a connection error and sends again).
func (c *Conflicts) forward(w http.ResponseWriter, r *http.Request) {
	if !c.takeLoss() {
		c.next.ServeHTTP(w, r)
		return
	}
	c.next.ServeHTTP(httptest.NewRecorder(), r)
	c.lost.Add(1)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "dynamotest: cannot lose the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // close with RST, not FIN
	}
	_ = conn.Close()
}

// takeLoss reports whether the write at hand is to lose its response, counting it off.
func (c *Conflicts) takeLoss() bool {
	for {
		n := c.toLose.Load()
		if n <= 0 {
			return false
		}
		if c.toLose.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// itemID names the item a request's Item or Key designates in table.
func itemID(table string, req writeRequest) string {
	src := req.Key
	if src == nil {
		src = req.Item
	}
	pk, _ := json.Marshal(src[ledger.AttrPK])
	sk, _ := json.Marshal(src[ledger.AttrSK])
	return table + "\x00" + string(pk) + "\x00" + string(sk)
}

// refuse answers an error as DynamoDB's JSON protocol does.
func refuse(w http.ResponseWriter, typ string, fields map[string]any) {
	fields["__type"] = "com.amazonaws.dynamodb.v20120810#" + typ
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Requestid", "dynamotest-conflict")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(fields)
}

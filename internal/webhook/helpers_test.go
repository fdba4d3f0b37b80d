package webhook_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging/logtest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/webhookauth"
	"github.com/buyflow/buyflow/internal/workflow"
)

const (
	tenant     = "111122223333"
	domain     = "api.example.com"
	seller9421 = "seller-9421"
	sellerHMAC = "seller-hmac"
	hmacSecret = "0123456789abcdef0123456789abcdef-hmac"
)

// env is one test's world: the ledger on kumo, two sellers (RFC 9421 and HMAC) and the service.
type env struct {
	t      testing.TB
	ctx    context.Context
	clock  *clocktest.Clock
	api    *dynamodb.Client
	table  string
	store  *ledger.Store
	tasks  *stagetest.Completer
	svc    *webhook.Service
	key    ed25519.PrivateKey
	logBuf *logtest.Buffer
}

func newEnv(t testing.TB) *env { return newEnvWith(t, nil) }

// newEnvWith is newEnv with a hook that adjusts the service's configuration.
func newEnvWith(t testing.TB, adjust func(*webhook.Config)) *env {
	t.Helper()
	api, table := dynamotest.Start(t)
	// Far in the future: kumo's TTL reaper runs on the real clock and must never delete the
	// receipts and nonces a test relies on.
	clk := clocktest.At(time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC))
	store := ledger.New(api, table)
	store.Now = clk.Now
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := webhookauth.PublicJWK("kid-1", key)
	if err != nil {
		t.Fatal(err)
	}
	v9421, err := webhookauth.New(webhookauth.Config{Mode: webhookauth.ModeRFC9421, JWKS: []byte(`{"keys":[` + string(jwk) + `]}`), Replay: store, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	vHMAC, err := webhookauth.New(webhookauth.Config{Mode: webhookauth.ModeHMAC, Secrets: [][]byte{[]byte(hmacSecret)}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: context.Background(), clock: clk, api: api, table: table, store: store, tasks: &stagetest.Completer{}, key: key, logBuf: &logtest.Buffer{}}
	var w io.Writer = e.logBuf
	cfg := webhook.Config{
		Ledger: store, Operations: store,
		Verifiers: map[string]webhook.Verifier{seller9421: v9421, sellerHMAC: vHMAC},
		Tasks:     e.tasks, Now: clk.Now,
		Logger: slog.New(slog.NewJSONHandler(w, nil)),
	}
	if adjust != nil {
		adjust(&cfg)
	}
	svc, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

// op creates a submitted operation of seller with a webhook token "tok-<id>-0123456789", its
// id index item (what the ledger's create is asked to write) and a parked task token.
func (e *env) op(id, seller string, parked bool) *record.Operation {
	e.t.Helper()
	hash := record.HashToken(token(id))
	op, err := e.store.CreateOperation(e.ctx, record.Operation{ID: id, Tenant: tenant, SellerID: seller, Status: workflow.StatusSubmitted,
		SellerTaskID: "task-" + id, WebhookTokenHash: hash, BudgetTotal: "1500.00", Currency: "USD",
		Deadline: e.clock.Now().Add(24 * time.Hour)})
	if err != nil {
		e.t.Fatal(err)
	}
	if parked {
		if op, err = e.store.SetTaskToken(e.ctx, tenant, id, "sfn-token-"+id); err != nil {
			e.t.Fatal(err)
		}
	}
	return op
}

// syncOp creates an operation whose create the seller answered inline: completed, a media
// buy, no seller task.
func (e *env) syncOp(id, seller, mediaBuyID string) *record.Operation {
	e.t.Helper()
	return e.syncOpWithToken(id, seller, mediaBuyID, token(id))
}

// syncOpWithToken is syncOp with the operation's webhook token.
func (e *env) syncOpWithToken(id, seller, mediaBuyID, tok string) *record.Operation {
	e.t.Helper()
	op, err := e.store.CreateOperation(e.ctx, record.Operation{ID: id, Tenant: tenant, SellerID: seller, Status: workflow.StatusCreating,
		BudgetTotal: "1500.00", Currency: "USD"})
	if err != nil {
		e.t.Fatal(err)
	}
	hash, deadline := record.HashToken(tok), e.clock.Now().Add(24*time.Hour)
	op, err = e.store.Transition(e.ctx, tenant, id, workflow.StatusCompleted, op.Version, record.Patch{MediaBuyID: &mediaBuyID,
		WebhookTokenHash: &hash, Deadline: &deadline, Actor: "seller:" + seller})
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

func token(id string) string { return "tok-" + id + "-0123456789" }

// payload is a webhook body for the operation id with the given status and idempotency key.
func payload(id, status, key string) map[string]any {
	p := map[string]any{"idempotency_key": key, "operation_id": id, "task_id": "task-" + id, "task_type": "create_media_buy",
		"status": status, "timestamp": "2099-01-01T12:00:00Z", "token": token(id)}
	if status == "completed" {
		p["result"] = map[string]any{"media_buy_id": "mb-" + id, "status": "completed", "packages": []any{map[string]any{"package_id": "pkg-1"}}}
	}
	return p
}

func key(s string) string { return fmt.Sprintf("whk_%s_0123456789", s) }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signOpts varies how a delivery is signed.
type signOpts struct {
	at          time.Time // signing time (zero: the clock's now)
	wrongSecret bool      // HMAC: sign with another secret
	tamper      bool      // change the body after signing
	badSig      bool      // 9421: corrupt the signature bytes
	mode        string    // override the mode: "hmac" or "9421"
	query       string    // the URL's query (a route: "route=..."), signed with it
}

// request builds the API Gateway event a seller's POST produces: lower-cased headers, the
// operation id path parameter, the raw body.
func (e *env) request(id, seller string, body []byte, o signOpts) events.APIGatewayV2HTTPRequest {
	e.t.Helper()
	url := "https://" + domain + "/v1/webhooks/adcp/" + id
	if o.query != "" {
		url += "?" + o.query
	}
	hr, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	at := o.at
	if at.IsZero() {
		at = e.clock.Now()
	}
	now := func() time.Time { return at }
	mode := o.mode
	if mode == "" {
		mode = map[string]string{seller9421: "9421", sellerHMAC: "hmac"}[seller]
	}
	switch mode {
	case "hmac":
		secret := hmacSecret
		if o.wrongSecret {
			secret = "ffffffffffffffffffffffffffffffff-other"
		}
		err = (&webhookauth.HMACSigner{Secret: []byte(secret), Now: now}).Sign(hr, body)
	default:
		err = (&webhookauth.RFC9421Signer{KeyID: "kid-1", Key: e.key, Now: now}).Sign(hr, body)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	h := map[string]string{}
	for k, v := range hr.Header {
		h[strings.ToLower(k)] = strings.Join(v, ",")
	}
	if o.badSig {
		sig := h["signature"]
		i := strings.Index(sig, ":") + 5
		c := byte('A')
		if sig[i] == 'A' {
			c = 'B'
		}
		h["signature"] = sig[:i] + string(c) + sig[i+1:]
	}
	if o.tamper {
		body = bytes.Replace(body, []byte(`"status":"`), []byte(`"status": "`), 1)
	}
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /v1/webhooks/adcp/{operation_id}", RawPath: "/v1/webhooks/adcp/" + id,
		RawQueryString: o.query, Headers: h, PathParameters: map[string]string{"operation_id": id}, Body: string(body),
		RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: domain, Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/v1/webhooks/adcp/" + id}},
	}
}

// deliver signs and posts a payload.
func (e *env) deliver(id, seller string, p map[string]any, o signOpts) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	return e.post(e.request(id, seller, mustJSON(e.t, p), o))
}

func (e *env) post(req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	resp, err := e.svc.HandleHTTP(e.ctx, req)
	if err != nil {
		e.t.Fatalf("HandleHTTP returned an error: %v", err)
	}
	return resp
}

func outcome(t testing.TB, resp events.APIGatewayV2HTTPResponse) webhook.Outcome {
	t.Helper()
	var a webhook.Answer
	if err := json.Unmarshal([]byte(resp.Body), &a); err != nil {
		t.Fatalf("answer %d %q is not JSON: %v", resp.StatusCode, resp.Body, err)
	}
	return a.Outcome
}

func (e *env) get(id string) *record.Operation {
	e.t.Helper()
	op, err := e.store.GetOperation(e.ctx, tenant, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

// webhookEvents returns the operation's timeline entries of type webhook.
func (e *env) webhookEvents(id string) []record.Event {
	e.t.Helper()
	var out []record.Event
	cursor := ""
	for {
		p, err := e.store.ListEvents(e.ctx, tenant, id, 100, cursor)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, ev := range p.Items {
			if ev.Type == record.EventWebhook {
				out = append(out, ev)
			}
		}
		if p.Cursor == "" {
			return out
		}
		cursor = p.Cursor
	}
}

// hasReceipt reports whether a receipt for (seller, idempotency key) is stored.
func (e *env) hasReceipt(seller, idemKey string) bool {
	e.t.Helper()
	sum := sha256.Sum256([]byte(seller + "\x00" + idemKey))
	out, err := e.api.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			ledger.AttrPK: &types.AttributeValueMemberS{Value: "RECEIPT#" + hex.EncodeToString(sum[:])},
			ledger.AttrSK: &types.AttributeValueMemberS{Value: "RECEIPT"},
		}})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(out.Item) > 0
}

// count returns the number of table items whose pk starts with prefix.
func (e *env) count(prefix string) int {
	e.t.Helper()
	n := 0
	var start map[string]types.AttributeValue
	for {
		out, err := e.api.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String(e.table), ExclusiveStartKey: start})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, it := range out.Items {
			if pk, ok := it[ledger.AttrPK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, prefix) {
				n++
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return n
		}
		start = out.LastEvaluatedKey
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

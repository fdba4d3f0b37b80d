package registry_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/registry"
)

// benchAgents is the registry the cold-start benchmark loads.
const benchAgents = 500

// Prices (us-east-1 list prices) and the cold-start budget the comparison uses.
const (
	// DynamoDB on demand: $0.125 per million read request units; a strongly consistent Query
	// costs one unit per 4 KB of items read, summed over the page.
	dynamoUSDPerMillionRRU = 0.125
	// SSM Parameter Store: standard throughput is free but capped (40 transactions a second
	// for the account and region, shared by every function's cold start); higher throughput
	// costs $0.05 per 10,000 API interactions. GetParametersByPath returns at most 10
	// parameters a call.
	ssmUSDPerTenThousandCalls = 0.05
	ssmMaxResults             = 10
	ssmStandardTPS            = 40
	// coldStartBudget is the budget of a function's cold start to its first poll.
	coldStartBudget = 25 * time.Millisecond
)

// benchRecord is a realistic registry entry: a seller with a JWKS URL, settings, and the
// capabilities the last check kept (about 700 bytes stored).
func benchRecord(i int) registry.Record {
	id := fmt.Sprintf("seller-%04d", i)
	return registry.Record{
		Agent: adcp.Agent{ID: id, Role: adcp.RoleSeller, MCPURL: "https://" + id + ".sales.example.com/mcp",
			CredentialRef: "Buyflow/agents/" + id,
			Webhook:       &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKSURI: "https://" + id + ".sales.example.com/.well-known/jwks.json"}},
		Settings: json.RawMessage(`{"sweep_reads_per_second":10,"poll_cap_seconds":3600}`),
		Capabilities: &registry.Capabilities{CheckedAt: time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC),
			SupportedVersions: []string{"3.0", "3.1"}, ReplayTTLSeconds: 86400,
			Tools:          []string{"create_media_buy", "get_adcp_capabilities", "get_media_buys", "get_task_status", "list_tasks", "update_media_buy"},
			WebhookSigning: json.RawMessage(`{"supported":true,"profile":"adcp/webhook-signing/v1","algorithms":["ed25519"]}`)},
	}
}

// countingDynamo counts the requests and the bytes of the items a load reads.
type countingDynamo struct {
	*dynamodb.Client
	calls, bytes atomic.Int64
}

func (c *countingDynamo) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.calls.Add(1)
	out, err := c.Client.Query(ctx, in, opts...)
	if err == nil {
		for _, it := range out.Items {
			for k, v := range it {
				c.bytes.Add(int64(len(k)))
				switch v := v.(type) {
				case *ddbtypes.AttributeValueMemberS:
					c.bytes.Add(int64(len(v.Value)))
				case *ddbtypes.AttributeValueMemberN:
					c.bytes.Add(int64(len(v.Value)))
				}
			}
		}
	}
	return out, err
}

type result struct {
	store            string
	perLoad          time.Duration
	calls            int64
	bytes            int64
	usdPerMillion    float64
	coldStartsPerSec float64
}

var (
	resultsMu sync.Mutex
	results   = map[string]result{}
)

// replaying answers every request it has seen before with the answer it recorded, without a
// network or a server: the timed loads then measure the function's own work (the SDK's
// signing and parsing, the registry's decoding), not the emulator's, which on AWS runs
// elsewhere. Every request is a round trip on AWS.
type replaying struct {
	mu      sync.Mutex
	answers map[string][]byte
}

func (r *replaying) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
	}
	key := req.Method + " " + req.URL.Path + " " + req.Header.Get("X-Amz-Target") + " " + string(body)
	r.mu.Lock()
	ans, ok := r.answers[key]
	r.mu.Unlock()
	if !ok {
		req.Body = io.NopCloser(bytes.NewReader(body))
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		ans, err = httputil.DumpResponse(resp, true)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.answers[key] = ans
		r.mu.Unlock()
	}
	return http.ReadResponse(bufio.NewReader(bytes.NewReader(ans)), req)
}

func replayClient() *http.Client {
	return &http.Client{Transport: &replaying{answers: map[string][]byte{}}}
}

// BenchmarkRegistryColdStart500 measures what a function's cold start pays to read a registry
// of 500 agents from each candidate store: the ledger table (one Query: the chosen store) and
// SSM Parameter Store (one parameter per agent, read by path ten at a time, AWS's cap). Both
// are served once by the same emulator (kumo); the timed loads replay those answers, so the
// figure is the function's own CPU (SDK and registry code), to which AWS adds one network
// round trip per request. It prints the comparison with the list price of a million cold
// starts.
func BenchmarkRegistryColdStart500(b *testing.B) {
	if dynamotest.Current() == dynamotest.Moto {
		b.Skip("the comparison runs both stores on kumo (moto's second run would compare unlike servers)")
	}
	ctx := context.Background()
	defer printRegistryTable()
	b.Run("store=dynamodb", func(b *testing.B) {
		client, table := dynamotest.Start(b)
		store := registry.NewStore(client, table)
		for i := range benchAgents {
			if _, err := store.Add(ctx, benchRecord(i), "bench", registry.ActionAdded); err != nil {
				b.Fatal(err)
			}
		}
		api := &countingDynamo{Client: dynamodb.NewFromConfig(dynamotest.AWSConfig(), func(o *dynamodb.Options) { o.HTTPClient = replayClient() })}
		load := func() {
			c, err := registry.Open(ctx, api, table, "Buyflow/agents/")
			if err != nil {
				b.Fatal(err)
			}
			// An invocation then uses an agent or two, each decoded on first use.
			if _, err := c.Lookup(ctx, "seller-0042"); err != nil {
				b.Fatal(err)
			}
		}
		load() // records the answer
		api.calls.Store(0)
		api.bytes.Store(0)
		b.ResetTimer()
		for b.Loop() {
			load()
		}
		b.StopTimer()
		calls, bytes := api.calls.Load()/int64(b.N), api.bytes.Load()/int64(b.N)
		b.ReportMetric(float64(calls), "requests/load")
		b.ReportMetric(float64(bytes), "bytes/load")
		rru := float64((bytes + 4095) / 4096)
		record(result{store: "dynamodb (ledger table)", perLoad: b.Elapsed() / time.Duration(b.N), calls: calls, bytes: bytes,
			usdPerMillion: rru * dynamoUSDPerMillionRRU})
	})
	b.Run("store=ssm", func(b *testing.B) {
		client := ssm.NewFromConfig(dynamotest.AWSConfig(), func(o *ssm.Options) { o.HTTPClient = replayClient() })
		path := fmt.Sprintf("/buyflow-bench-%d/agents/", time.Now().UnixNano())
		for i := range benchAgents {
			r := benchRecord(i)
			doc, _ := json.Marshal(r)
			if _, err := client.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(path + r.ID), Value: aws.String(string(doc)),
				Type: ssmtypes.ParameterTypeString}); err != nil {
				b.Fatal(err)
			}
		}
		var calls, bytes int64
		// The same work as the ledger table's load: read every document, decode the one used.
		load := func() {
			docs := map[string]string{}
			var next *string
			for {
				out, err := client.GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String(path),
					MaxResults: aws.Int32(ssmMaxResults), NextToken: next})
				if err != nil {
					b.Fatal(err)
				}
				calls++
				for _, p := range out.Parameters {
					docs[aws.ToString(p.Name)] = aws.ToString(p.Value)
					bytes += int64(len(aws.ToString(p.Value)))
				}
				if next = out.NextToken; aws.ToString(next) == "" {
					break
				}
			}
			if len(docs) != benchAgents {
				b.Fatalf("loaded %d agents", len(docs))
			}
			var r registry.Record
			if err := json.Unmarshal([]byte(docs[path+"seller-0042"]), &r); err != nil {
				b.Fatal(err)
			}
			if err := registry.Validate(r, "Buyflow/agents/"); err != nil {
				b.Fatal(err)
			}
		}
		load() // records the answers
		calls, bytes = 0, 0
		b.ResetTimer()
		for b.Loop() {
			load()
		}
		b.StopTimer()
		calls, bytes = calls/int64(b.N), bytes/int64(b.N)
		b.ReportMetric(float64(calls), "requests/load")
		b.ReportMetric(float64(bytes), "bytes/load")
		record(result{store: "ssm parameter store", perLoad: b.Elapsed() / time.Duration(b.N), calls: calls, bytes: bytes,
			usdPerMillion: float64(calls) * ssmUSDPerTenThousandCalls * 100, coldStartsPerSec: float64(ssmStandardTPS) / float64(calls)})
	})
}

func record(r result) {
	resultsMu.Lock()
	results[r.store] = r
	resultsMu.Unlock()
}

// printRegistryTable prints the comparison once both stores ran (go test -bench prints each
// sub-benchmark's metrics on its own line; the table puts them side by side with the prices).
func printRegistryTable() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if len(results) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nregistry cold start, %d agents: the function's own CPU per load (kumo's answers replayed); AWS adds one round trip per request\n", benchAgents)
	fmt.Fprintf(&b, "%-24s %10s %9s %8s %21s %30s\n", "store", "CPU/load", "requests", "KB", "$ per 1M cold starts", "cold starts/s without charge")
	for _, k := range []string{"dynamodb (ledger table)", "ssm parameter store"} {
		r, ok := results[k]
		if !ok {
			continue
		}
		free := "unlimited (on demand)"
		if r.coldStartsPerSec > 0 {
			free = fmt.Sprintf("%.1f (40 TPS, standard)", r.coldStartsPerSec)
		}
		over := ""
		if r.perLoad > coldStartBudget {
			over = "  OVER BUDGET (cold start ≤ 25 ms)"
		}
		fmt.Fprintf(&b, "%-24s %10s %9d %8d %21.2f %30s%s\n", k, r.perLoad.Round(10*time.Microsecond), r.calls, r.bytes/1024, r.usdPerMillion, free, over)
	}
	_, _ = os.Stdout.WriteString(b.String())
}

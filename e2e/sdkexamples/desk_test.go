package sdkexamples

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// ioDesk plays the seller's people in front of the SDK's fake upstream ad server: the
// guaranteed example creates an order there, then polls the order's IO review task until it
// ends (hello_seller_adapter_guaranteed.ts, completeIoAndCreateLineItems). The fake approves
// every review on its second poll; the desk instead holds each poll of a review open until a
// test decides it, so a review lasts as long as the test needs (as a person's would). An
// approval hands the task back to the fake, which approves it; a refusal answers the task
// rejected with the reviewer's note. Everything else passes through.
//
// Reviews are found by the order's name, which the example builds from the buy's brand
// domain ("MediaBuy from <domain>"): each test gives its buy a brand domain of its own.
type ioDesk struct {
	proxy *httputil.ReverseProxy

	mu      sync.Mutex
	reviews map[string]*review // by brand domain
	byTask  map[string]*review // by the upstream's review task id
	closed  chan struct{}
}

// review is one order's IO review.
type review struct {
	orderID, taskID string
	// polled is closed at the example's first poll of the review: the review is under way.
	polled chan struct{}
	// decided is closed once a test decided; refused and note say how.
	decided chan struct{}
	refused bool
	note    string
}

func newIODesk(upstream string) (*ioDesk, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	return &ioDesk{proxy: httputil.NewSingleHostReverseProxy(u), reviews: map[string]*review{}, byTask: map[string]*review{},
		closed: make(chan struct{})}, nil
}

// close releases every held poll (the suite ends).
func (d *ioDesk) close() { close(d.closed) }

// reviewOf returns the review of the buy with brand domain, created on first use.
func (d *ioDesk) reviewOf(domain string) *review {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.reviews[domain]
	if r == nil {
		r = &review{polled: make(chan struct{}), decided: make(chan struct{})}
		d.reviews[domain] = r
	}
	return r
}

// underReview waits until the seller polls the review of the buy with brand domain.
func (d *ioDesk) underReview(t testing.TB, domain string) *review {
	t.Helper()
	r := d.reviewOf(domain)
	select {
	case <-r.polled:
		return r
	case <-time.After(60 * time.Second):
		t.Fatalf("the seller did not start the IO review of %s", domain)
		return nil
	}
}

// approve and refuse decide the review of the buy with brand domain.
func (d *ioDesk) approve(domain string)      { d.decide(domain, false, "") }
func (d *ioDesk) refuse(domain, note string) { d.decide(domain, true, note) }

func (d *ioDesk) decide(domain string, refused bool, note string) {
	r := d.reviewOf(domain)
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-r.decided:
		return
	default:
	}
	r.refused, r.note = refused, note
	close(r.decided)
}

func (d *ioDesk) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.Method == http.MethodPost && req.URL.Path == "/v1/orders":
		d.createOrder(w, req)
	case req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/v1/tasks/"):
		d.pollTask(w, req, strings.TrimPrefix(req.URL.Path, "/v1/tasks/"))
	default:
		d.proxy.ServeHTTP(w, req)
	}
}

// createOrder passes the order on and notes its review task under the buy's brand domain.
func (d *ioDesk) createOrder(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var order struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(body, &order) // the upstream judges the body; an unnamed order has no review here
	req.Body = io.NopCloser(bytes.NewReader(body))
	rec := &recorder{header: http.Header{}}
	d.proxy.ServeHTTP(rec, req)
	var created struct {
		OrderID        string `json:"order_id"`
		ApprovalTaskID string `json:"approval_task_id"`
	}
	if json.Unmarshal(rec.body.Bytes(), &created) == nil && created.ApprovalTaskID != "" {
		if domain, ok := strings.CutPrefix(order.Name, "MediaBuy from "); ok {
			r := d.reviewOf(domain)
			d.mu.Lock()
			r.orderID, r.taskID = created.OrderID, created.ApprovalTaskID
			d.byTask[created.ApprovalTaskID] = r
			d.mu.Unlock()
		}
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.code())
	_, _ = w.Write(rec.body.Bytes())
}

// pollTask holds a poll of an undecided review (up to 4 minutes, below the example's HTTP
// client's 5-minute wait for headers, then answers it still working), answers a refused one
// rejected, and hands an approved one to the upstream.
func (d *ioDesk) pollTask(w http.ResponseWriter, req *http.Request, taskID string) {
	d.mu.Lock()
	r := d.byTask[taskID]
	if r != nil {
		select {
		case <-r.polled:
		default:
			close(r.polled)
		}
	}
	d.mu.Unlock()
	if r == nil {
		d.proxy.ServeHTTP(w, req)
		return
	}
	status := "working"
	select {
	case <-r.decided:
		if !r.refused {
			d.proxy.ServeHTTP(w, req)
			return
		}
		status = "rejected"
	case <-req.Context().Done():
		return // the seller gave up (or was killed): nobody reads an answer
	case <-d.closed:
	case <-time.After(4 * time.Minute):
	}
	task := map[string]any{"task_id": taskID, "order_id": r.orderID, "status": status}
	if status == "rejected" {
		task["result"] = map[string]any{"outcome": "rejected", "reviewer_note": r.note}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(task)
}

// recorder keeps a proxied answer so that it can be read before it is passed on.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(status int)      { r.status = status }

// code is the status the proxy wrote (200 when it wrote none).
func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

package adcptest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sellerURL, govURL, stop, err := Serve(ctx, "127.0.0.1:0", Config{
		Seller: SellerOptions{Behavior: SellerAsyncComplete, StepInterval: 10 * time.Millisecond},
		Tick:   5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	s := connect(t, sellerURL, DefaultSellerToken, 5*time.Second)
	g := connect(t, govURL, DefaultGovernanceToken, 5*time.Second)
	if r := callT(t, g, "check_governance", checkArgs("", 1000)); r.str("verdict") != "approved" {
		t.Fatalf("%s", r.Raw)
	}
	id := callT(t, s, "create_media_buy", createArgs("")).str("task_id")
	deadline := time.Now().Add(3 * time.Second)
	for {
		if st := poll(t, s, "get_task_status", id).str("status"); st == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("task never completed on the ticker")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get(strings.TrimSuffix(sellerURL, "/mcp") + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"keys"`) {
		t.Errorf("jwks: %d %s", resp.StatusCode, b)
	}
}

func TestServeRefusesNonLoopback(t *testing.T) {
	if _, _, _, err := Serve(context.Background(), "0.0.0.0:0", Config{}); err == nil {
		t.Error("bound a non-loopback address")
	}
}

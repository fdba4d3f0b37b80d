package adcptest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Config configures Serve.
type Config struct {
	// Seller configures the simulated seller.
	Seller SellerOptions
	// Governance configures the simulated governance agent.
	Governance GovernanceOptions
	// Tick is how often tasks whose StepInterval elapsed are advanced
	// (default 200 ms; only matters when a StepInterval is set).
	Tick time.Duration
}

// Serve starts a seller and a governance agent on one loopback listener at
// addr ("127.0.0.1:0" picks a free port; any non-loopback host is refused).
// The seller's MCP endpoint is <origin>/seller/mcp (JWKS at
// <origin>/seller/.well-known/jwks.json), the governance agent's is
// <origin>/governance/mcp. stop shuts both down and waits for in-flight
// webhook deliveries; cancelling ctx does the same.
func Serve(ctx context.Context, addr string, cfg Config) (sellerURL, govURL string, stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", nil, fmt.Errorf("serve adcptest agents: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", "", nil, fmt.Errorf("serve adcptest agents: %s is not a loopback address", host)
	}
	s := NewSeller(cfg.Seller)
	g := NewGovernance(cfg.Governance)
	if s.valErr != nil {
		return "", "", nil, fmt.Errorf("serve adcptest agents: %w", s.valErr)
	}
	mux := http.NewServeMux()
	mux.Handle("/seller/", http.StripPrefix("/seller", s))
	mux.Handle("/governance/", http.StripPrefix("/governance", g))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", "", nil, fmt.Errorf("serve adcptest agents: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()

	tick := cfg.Tick
	if tick <= 0 {
		tick = 200 * time.Millisecond
	}
	done := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				_ = srv.Close()
			}
			s.Close()
			g.Close()
		})
	}
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.AdvanceDue()
				g.AdvanceDue()
			case <-ctx.Done():
				stop()
				return
			case <-done:
				return
			}
		}
	}()
	origin := "http://" + ln.Addr().String()
	return origin + "/seller/mcp", origin + "/governance/mcp", stop, nil
}

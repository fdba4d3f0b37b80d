package devstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/statemachine"
)

// TestStackPlumbing starts the stack with a stand-in bootstrap (testdata/echo) behind every
// function and calls a route through the HTTP API: processes, runtime API polling, the
// emulator proxy and the API front all work. It needs 127.0.0.1:4566, so it runs only with
// BUYFLOW_E2E=1, like the end-to-end suite, and takes turns with it for the port.
func TestStackPlumbing(t *testing.T) {
	if os.Getenv("BUYFLOW_E2E") != "1" {
		t.Skip("the local stack owns 127.0.0.1:4566; set BUYFLOW_E2E=1 to run it (make test does)")
	}
	// The context covers the port wait below (the other suites hold the port in turn) and the
	// run itself.
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	bin := t.TempDir()
	echo := filepath.Join(bin, "echo")
	if out, err := runGo(ctx, "build", "-tags", "lambda.norpc", "-o", echo, "./testdata/echo"); err != nil {
		t.Fatalf("build echo: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(echo)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range topology.App.Functions {
		if err := os.MkdirAll(filepath.Join(bin, f.Name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(devstack.BootstrapPath(bin, f.Name), raw, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	st, err := devstack.Start(ctx, devstack.Options{BinDir: bin, Log: testWriter{t}, PortWait: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	resp, err := http.Get(st.APIURL + "/v1/approvals/ap-123?t=x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET approval: %s: %s", resp.Status, body)
	}
	var ev struct {
		RouteKey       string            `json:"routeKey"`
		PathParameters map[string]string `json:"pathParameters"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatalf("decode event: %v: %s", err, body)
	}
	if ev.RouteKey != "GET /v1/approvals/{approval_id}" || ev.PathParameters["approval_id"] != "ap-123" {
		t.Errorf("event = %+v, want the approve route with approval_id ap-123", ev)
	}
	for _, f := range topology.App.Functions {
		if st.ColdStarts[f.Name] <= 0 {
			t.Errorf("no cold start recorded for %s", f.Name)
		}
	}
	checkAgreesWithTopology(ctx, t, st)
	if n := len(running(t, bin)); n != len(topology.App.Functions)*2 {
		t.Errorf("%d bootstrap processes run, want 2 per function", n)
	}

	// A crash of every process of a function: the stack starts new ones and the route works.
	if n := st.Kill("approve"); n != 2 {
		t.Errorf("killed %d approve processes, want 2", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for st.Restarts("approve") < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := st.Restarts("approve"); got != 2 {
		t.Fatalf("%d approve processes restarted, want 2", got)
	}
	for {
		resp, err := http.Get(st.APIURL + "/v1/approvals/ap-456?t=x")
		if err != nil {
			t.Fatal(err)
		}
		discardBody(resp)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET approval after the restart: %s", resp.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(running(t, bin)); n != len(topology.App.Functions)*2 {
		t.Errorf("%d bootstrap processes run after the restart, want 2 per function", n)
	}

	// A body Lambda cannot take gets API Gateway's 413, not a 500.
	big := strings.NewReader(strings.Repeat("x", devstack.MaxInvokePayload+1))
	resp, err = http.Post(st.APIURL+"/v1/media-buys", "application/json", big)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "Request Entity Too Large") {
		t.Errorf("a 6 MB body answered %s %q, want 413 Request Entity Too Large", resp.Status, body)
	}
	st.Close()
	if left := running(t, bin); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
	// Not "nothing answers on 4566": another suite's stack may take the port the moment this
	// one lets it go. What must hold is that this process listens there no more.
	if listeningOn(t, 4566) {
		t.Error("this process still listens on 127.0.0.1:4566 after Close")
	}
}

// listeningOn reports whether this process holds a listening TCP socket on port (Linux /proc:
// the LISTEN sockets of /proc/net/tcp on that port, against the sockets among our fds).
func listeningOn(t *testing.T, port int) bool {
	t.Helper()
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		// local_address is HEXIP:HEXPORT; st 0A is LISTEN; the inode is the tenth field.
		if len(f) > 9 && strings.HasSuffix(f[1], fmt.Sprintf(":%04X", port)) && f[3] == "0A" {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && inodes[target] {
			return true
		}
	}
	return false
}

func discardBody(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// running lists the pids of processes whose executable lies under dir (Linux /proc).
func running(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var out []string
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.HasPrefix(exe, dir+string(filepath.Separator)) {
			out = append(out, e.Name()+" "+exe)
		}
	}
	return out
}

// checkAgreesWithTopology reads back what the emulator holds and compares it with the one
// application description: every function with exactly its environment names, every route
// to its function (payload 2.0, IAM where declared), and the state machine rendered from the
// same ASL with the functions' ARNs.
func checkAgreesWithTopology(ctx context.Context, t *testing.T, st *devstack.Stack) {
	t.Helper()
	d, err := st.Deployed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Functions) != len(topology.App.Functions) {
		t.Errorf("emulator has %d functions, topology %d", len(d.Functions), len(topology.App.Functions))
	}
	subs := map[string]string{}
	for _, f := range topology.App.Functions {
		got, ok := d.Functions[f.Name]
		if !ok {
			t.Errorf("function %s is not deployed", f.Name)
			continue
		}
		want := slices.Clone(f.Env)
		slices.Sort(want)
		if !slices.Equal(got.Env, want) {
			t.Errorf("function %s env %v, topology %v", f.Name, got.Env, want)
		}
		if f.Placeholder != "" {
			subs[f.Placeholder] = got.ARN
		}
	}
	if len(d.Routes) != len(topology.App.Routes) {
		t.Errorf("emulator has %d routes, topology %d", len(d.Routes), len(topology.App.Routes))
	}
	for _, r := range topology.App.Routes {
		got, ok := d.Routes[r.Key()]
		if !ok {
			t.Errorf("route %s is not deployed", r.Key())
			continue
		}
		wantAuth := "NONE"
		if r.Auth == topology.AuthIAM {
			wantAuth = "AWS_IAM"
		}
		if got.FunctionARN != d.Functions[r.Function].ARN || got.PayloadFormatVersion != "2.0" || got.AuthorizationType != wantAuth {
			t.Errorf("route %s = %+v, want function %s, payload 2.0, auth %s", r.Key(), got, r.Function, wantAuth)
		}
	}
	def, err := statemachine.Render(statemachine.Only(subs, statemachine.Placeholders))
	if err != nil {
		t.Fatal(err)
	}
	if d.Definition != def {
		t.Error("the deployed state machine is not statemachine.Render of the deployed functions' ARNs")
	}
}

package approve_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/buyflow/buyflow/internal/apigwtest"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/approvaltest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The browser test drives the real confirm page in headless Chromium. It needs the Debian
// chromium package, so it runs only when BUYFLOW_BROWSER_TESTS=1 (make test sets it).
const (
	browserTestsEnv = "BUYFLOW_BROWSER_TESTS"
	artifactsEnv    = "BUYFLOW_ARTIFACTS"
	chromiumPath    = "/usr/bin/chromium"
)

func TestBrowserApproveFromConfirmPage(t *testing.T) {
	if os.Getenv(browserTestsEnv) != "1" {
		t.Skipf("browser test skipped: set %s=1 to run it (needs Chromium at %s: apt-get install -y chromium)", browserTestsEnv, chromiumPath)
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s=1 but Chromium is not installed at %s (apt-get install -y chromium): %v", browserTestsEnv, chromiumPath, err)
	}

	e := approvaltest.NewEnv(t, "")
	tok := approvaltest.Token(1)
	id := e.Request(tok)
	srv, seen := serveApprovals(t, e)

	// The link Slack got, pointed at the test server: the signature covers the approval id,
	// the approver, the expiry and the key id, not the host, so only the origin changes.
	slackLink := e.Link(id, approvaltest.Alice)
	link := srv.URL + slackLink.EscapedPath() + "?" + slackLink.RawQuery

	ctx := newBrowser(t)
	console := collectConsole(t, ctx)

	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(link))
	if err != nil {
		t.Fatalf("open the confirm page: %v", err)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("confirm page status %d", resp.Status)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("button.approve"))); err != nil {
		t.Fatalf("confirm page has no Approve button: %v", err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if title != "Approve a media buy? · buyflow" {
		t.Errorf("confirm page title = %q", title)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	amount := approvalcore.Money{Minor: 1250000, Currency: "USD"}.String()
	for _, want := range []string{
		"Approve a media buy?", approvaltest.Requester + " asks you to approve this media buy.", "Media buy, PO PO-42", "sports-network",
		amount, approvalcore.ReasonCode(e.Approval(id).Reason).Label(), approvalcore.FormatTime(e.Approval(id).ExpiresAt), approvaltest.OpID,
		"Comment (optional)", "Approve this buy", "Reject this buy", "You are deciding as " + approvaltest.Alice + ".",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("confirm page lacks %q; it reads:\n%s", want, text)
		}
	}
	// The inline style is allowed by its hash in the CSP: if the browser refused it, the
	// buttons would be unstyled (and the console would say so, checked at the end).
	bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("button.approve")).backgroundColor`))
	if err != nil {
		t.Fatal(err)
	}
	if bg != "rgb(20, 108, 46)" {
		t.Errorf("Approve button background = %q: the page style was not applied (CSP hash?)", bg)
	}
	// Viewing changes nothing.
	if a := e.Approval(id); a.Status != record.ApprovalPending {
		t.Fatalf("after the GET the approval is %s", a.Status)
	}

	// What is bought, at a desktop and at a phone width: every package row of the payload
	// governance checked (the display package ends in February, as the applied condition
	// says, not in March as submitted), the total, the verdict and both conditions.
	for _, width := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"desktop", 1024, 768, false}, {"phone", 390, 844, true}} {
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
		if width.mobile {
			opts = append(opts, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch)
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width.width, width.height, opts...)); err != nil {
			t.Fatalf("%s: set the viewport: %v", width.name, err)
		}
		checkWhatIsBought(t, ctx, width.name)
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("%s: screenshot: %v", width.name, err)
		}
		t.Logf("confirm page screenshot (%s): %s", width.name, writeArtifact(t, "approval-confirm-"+width.name+".png", shot))
	}
	if err := chromedp.Do(ctx, chromedp.EmulateReset()); err != nil {
		t.Fatal(err)
	}

	const comment = "Looks right — go ahead"
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("comment"), comment)); err != nil {
		t.Fatalf("type a comment: %v", err)
	}
	resp, err = chromedp.RunResponse(ctx, chromedp.Click(`//button[normalize-space()="Approve this buy"]`, chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("click Approve: %v", err)
	}
	if resp.Status != http.StatusOK {
		t.Errorf("result page status %d", resp.Status)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`//h1[normalize-space()="Approved"]`)); err != nil {
		t.Fatalf("no Approved page after the click: %v", err)
	}
	text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	decidedAt := e.Clock.Now()
	for _, want := range []string{"Approved by " + approvaltest.Alice + " at " + approvalcore.FormatTime(decidedAt) + ".", "Comment: " + comment, "The buy goes ahead."} {
		if !strings.Contains(text, want) {
			t.Errorf("result page lacks %q; it reads:\n%s", want, text)
		}
	}
	if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		t.Logf("result page screenshot: %s", writeArtifact(t, "approval-approved.png", shot))
	} else {
		t.Errorf("screenshot of the result page: %v", err)
	}

	// The ledger decided first, and the workflow got exactly one SendTaskSuccess.
	a := e.Approval(id)
	if a.Status != record.ApprovalApproved || a.Decider != approvaltest.Alice || a.Comment != comment || !a.DecidedAt.Equal(decidedAt) {
		t.Errorf("ledger approval = status %s by %q at %s comment %q", a.Status, a.Decider, a.DecidedAt, a.Comment)
	}
	calls := e.Tasks.Calls()
	if len(calls) != 1 || calls[0].Kind != "success" || calls[0].Token != tok {
		t.Fatalf("task calls = %+v, want one SendTaskSuccess for the token", calls)
	}
	var out workflow.ApprovalOutput
	if err := json.Unmarshal(calls[0].Output, &out); err != nil {
		t.Fatal(err)
	}
	if out.Decision != string(record.ApprovalApproved) || out.ApprovalID != id || out.DecidedBy != approvaltest.Alice {
		t.Errorf("task output = %+v", out)
	}
	if evs := e.EventsOf(record.EventDecision); len(evs) != 1 {
		t.Errorf("decision events = %+v, want one", evs)
	}

	// The browser sent one GET and one POST for the approval; the POST came back to the
	// link's own URL with the signed fields in the form.
	if got := seen.String(); got != "GET 200, POST 200" {
		t.Errorf("approval requests = %s, want one GET and one POST", got)
	}
	for _, m := range console.messages() {
		if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
			t.Errorf("browser console: %s (source %q)", m, m.Source)
		} else {
			t.Logf("browser console: %s (source %q)", m, m.Source)
		}
	}
}

// checkWhatIsBought reads the package table and the governance section as the browser lays
// them out, and fails unless they show the test buy exactly and fit the viewport.
func checkWhatIsBought(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("table tbody tr")).map(r => Array.from(r.cells).map(c => c.innerText.trim()).join(" | "))`))
	if err != nil {
		t.Fatalf("%s: read the package rows: %v", name, err)
	}
	usd := func(minor int64) string { return approvalcore.Money{Minor: minor, Currency: "USD"}.String() }
	want := []string{
		"ctv_premium_sports | 2026-01-05 → 2026-03-29 | " + usd(600000),
		"olv_highlights | 2026-01-05 → 2026-03-29 | " + usd(425000),
		"display_run_of_site | 2026-01-05 → 2026-02-28 | " + usd(225000),
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: package rows =\n%s\nwant\n%s", name, strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[
		document.querySelector("table caption").innerText.trim(),
		Array.from(document.querySelectorAll("thead th")).map(h => h.getAttribute("scope") + ":" + h.innerText.trim()).join(","),
		document.querySelector("tfoot tr").innerText.replace(/\s+/g, " ").trim(),
		document.querySelector("#governance").innerText.trim(),
		document.querySelector("section[aria-labelledby=governance] p").innerText.trim(),
		Array.from(document.querySelectorAll("ul.conditions li")).map(l => l.innerText.trim()).join("\n"),
		String(document.documentElement.scrollWidth <= window.innerWidth),
	]`))
	if err != nil {
		t.Fatalf("%s: read the page: %v", name, err)
	}
	wantAll := []string{
		"3 packages from sports-network",
		"col:Product,col:Flight,col:Budget",
		"Total " + usd(1250000),
		"What governance said",
		"Approved with 2 conditions",
		"packages[2].end_time: Display must end with the February flight\n" +
			"packages[1].targeting_overlay: Highlights may only run in the US and Canada: confirm the seller's geo targeting (needs your judgement)",
		"true",
	}
	labels := []string{"caption", "column headers", "total row", "governance heading", "verdict", "conditions", "fits the width"}
	for i := range wantAll {
		if i >= len(got) || got[i] != wantAll[i] {
			g := ""
			if i < len(got) {
				g = got[i]
			}
			t.Errorf("%s: %s = %q, want %q", name, labels[i], g, wantAll[i])
		}
	}
}

// newBrowser starts headless Chromium and returns a tab's context. Cleanup closes the tab and
// the browser and waits for the process to exit before the profile directory is removed.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	profile := t.TempDir() // registered first, so it is removed after the browser is gone
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root in CI
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1024, 768),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc) // cancels and waits for the browser process
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf), chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelTab)
	// Start the browser now, so a browser that cannot start fails here.
	if err := chromedp.Do(tabCtx); err != nil {
		t.Fatalf("start Chromium (%s): %v", chromiumPath, err)
	}
	return tabCtx
}

// consoleLog collects what the page writes to the browser console, the browser log included
// (CSP violations are reported there).
type consoleLog struct {
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

func collectConsole(t *testing.T, ctx context.Context) *consoleLog {
	t.Helper()
	c := &consoleLog{}
	ctx, cancel := context.WithCancel(ctx)
	msgs := chromedp.Console(ctx) // subscribes now, before the first navigation
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			c.mu.Lock()
			c.msgs = append(c.msgs, m)
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func (c *consoleLog) messages() []chromedp.ConsoleMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]chromedp.ConsoleMessage(nil), c.msgs...)
}

// requestLog records the approval requests the test server answered, as "METHOD status".
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, s)
}

func (l *requestLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.seen, ", ")
}

// serveApprovals serves the approve handler on 127.0.0.1 the way API Gateway's HTTP API
// (payload v2) invokes the Lambda: the route /prod/v1/approvals/{approval_id} (the stage
// prefix of baseURL), everything else 404.
func serveApprovals(t *testing.T, e *approvaltest.Env) (*httptest.Server, *requestLog) {
	t.Helper()
	prefix := strings.TrimPrefix(approvaltest.BaseURL, "https://api.example.com") + "/v1/approvals/"
	seen := &requestLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok || id == "" || strings.Contains(id, "/") {
			http.NotFound(w, r)
			return
		}
		req, err := apigwtest.Request(r, r.Method+" /v1/approvals/{approval_id}", map[string]string{"approval_id": id})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := e.Approver.HandleHTTP(r.Context(), req)
		if err != nil {
			t.Errorf("HandleHTTP returned an error: %v", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		seen.add(r.Method + " " + strconv.Itoa(resp.StatusCode))
		if err := apigwtest.WriteResponse(w, resp); err != nil {
			t.Errorf("write response: %v", err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

// writeArtifact writes a test artifact to $BUYFLOW_ARTIFACTS, or to artifacts/ at the root
// of the repository (git ignores it), and returns its path.
func writeArtifact(t *testing.T, name string, data []byte) string {
	t.Helper()
	dir := os.Getenv(artifactsEnv)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// repoRoot is the nearest directory up from the working directory that holds go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

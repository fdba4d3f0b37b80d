package benchtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// InitAllocs runs the calling test binary again, running no test, with GODEBUG=inittrace=1 and
// returns the heap allocations each package's init made: what every process that links those
// packages pays before main, a Lambda's cold start among them. Allocations, not clock time,
// so the figure does not depend on how loaded the machine is.
func InitAllocs(t testing.TB) map[string]int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run %s with inittrace: %v\n%s", os.Args[0], err, stderr.String())
	}
	allocs := map[string]int{}
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init github.com/x/y @2.2 ms, 6.8 ms clock, 486960 bytes, 3218 allocs
		f := strings.Fields(sc.Text())
		if len(f) < 11 || f[0] != "init" || f[len(f)-1] != "allocs" {
			continue
		}
		n, err := strconv.Atoi(f[len(f)-2])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		allocs[f[1]] += n
	}
	if len(allocs) == 0 {
		t.Fatalf("no inittrace lines from %s:\n%s", os.Args[0], stderr.String())
	}
	return allocs
}

// OwnInitAllocs is the most allocations one of buyflow's packages may make in its init: its
// maps and error values fit (internal/adcp's tables make about 120), a regexp with a counted
// repetition does not (statusevent's Slack id pattern made 307).
const OwnInitAllocs = 150

// CheckInitAllocs fails t for every package of the calling test binary whose path starts with
// prefix and whose init made more than limit allocations (InitAllocs): a guard on the work a
// cold start does before main.
func CheckInitAllocs(t testing.TB, prefix string, limit int) {
	t.Helper()
	for pkg, n := range InitAllocs(t) {
		if strings.HasPrefix(pkg, prefix) && n > limit {
			t.Errorf("init of %s made %d allocations, want ≤ %d: build what it needs on first use (sync.OnceValue), or, for a dependency, keep a version whose init does not", pkg, n, limit)
		}
	}
}

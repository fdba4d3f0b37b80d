package devstack_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/devstack"
)

// Two runs on one machine get two log files, in the temp folder, named after the run; a path
// given is the file used.
func TestEveryRunLogsToAFileOfItsOwn(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	a, err := devstack.NewLogFile("", "buyflow-local-functions")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	b, err := devstack.NewLogFile("", "buyflow-local-functions")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	if a.Name() == b.Name() {
		t.Fatalf("two runs share the log %s", a.Name())
	}
	for _, f := range []*os.File{a, b} {
		base := filepath.Base(f.Name())
		if filepath.Dir(f.Name()) != os.TempDir() || !strings.HasPrefix(base, "buyflow-local-functions-") || !strings.HasSuffix(base, ".log") {
			t.Errorf("log %s: want buyflow-local-functions-*.log in %s", f.Name(), os.TempDir())
		}
	}
	if _, err := a.WriteString("from the first run\n"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(b.Name()); len(got) != 0 {
		t.Errorf("the second run's log holds %q", got)
	}

	chosen := filepath.Join(t.TempDir(), "mine.log")
	c, err := devstack.NewLogFile(chosen, "ignored")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if c.Name() != chosen {
		t.Errorf("log %s, want the path given, %s", c.Name(), chosen)
	}
	if _, err := devstack.NewLogFile(filepath.Join(t.TempDir(), "no", "such", "folder", "x.log"), "x"); err == nil {
		t.Error("a log in a missing folder was created")
	}
}

package adcpschemas

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
)

// TestPackMatchesProvenance recomputes, from the embedded pack, the file count and the tree
// digest that scripts/vendor-adcp-schemas.sh wrote into PROVENANCE.md (sha256 over sha256sum's
// lines for every file, sorted by path), so a pack replaced or edited by hand fails here. That
// the pack equals its upstream folder is `make vendor-check`'s job: the folder is not part of
// the repository.
func TestPackMatchesProvenance(t *testing.T) {
	provenance, err := os.ReadFile("PROVENANCE.md")
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := regexp.MustCompile(`(?m)^- files: (\d+)$`).FindSubmatch(provenance)
	wantDigest := regexp.MustCompile(`(?m)^- tree digest [^:]*: ([0-9a-f]{64})$`).FindSubmatch(provenance)
	if wantFiles == nil || wantDigest == nil {
		t.Fatalf("PROVENANCE.md names no file count or tree digest:\n%s", provenance)
	}
	pack, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	paths := allFiles(t, pack)
	if got := fmt.Sprint(len(paths)); got != string(wantFiles[1]) {
		t.Errorf("the pack holds %s files, PROVENANCE.md says %s", got, wantFiles[1])
	}
	if got := treeDigest(t, pack, paths); got != string(wantDigest[1]) {
		t.Errorf("the pack's tree digest is %s, PROVENANCE.md says %s", got, wantDigest[1])
	}
}

// treeDigest is `find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum`.
func treeDigest(t *testing.T, fsys fs.FS, paths []string) string {
	t.Helper()
	named := make([]string, len(paths))
	for i, p := range paths {
		named[i] = "./" + p
	}
	slices.Sort(named)
	var lines strings.Builder
	for _, p := range named {
		body, err := fs.ReadFile(fsys, strings.TrimPrefix(p, "./"))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		fmt.Fprintf(&lines, "%s  %s\n", hex.EncodeToString(sum[:]), p)
	}
	sum := sha256.Sum256([]byte(lines.String()))
	return hex.EncodeToString(sum[:])
}

func TestEmbeddedSchemasValidate(t *testing.T) {
	schemas, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	v, err := adcp.NewValidator(schemas)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.ValidateRequest("create_media_buy", []byte(`{"idempotency_key":"short"}`)); err == nil {
		t.Fatal("an invalid create_media_buy passed the embedded schemas")
	}
}

func TestOverride(t *testing.T) {
	pack, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	env := func(dir string) func(string) string {
		return func(name string) string {
			if name == EnvOverride {
				return dir
			}
			return ""
		}
	}
	t.Run("unset: the embedded pack", func(t *testing.T) {
		got, err := fromEnv(env(""))
		if err != nil {
			t.Fatal(err)
		}
		if len(allFiles(t, got)) != len(allFiles(t, pack)) {
			t.Fatal("not the embedded pack")
		}
	})
	t.Run("a schema folder", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.CopyFS(dir, pack); err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(dir, "only-in-the-override.json")
		if err := os.WriteFile(marker, []byte(`{}`), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := fromEnv(env(dir))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Stat(got, "only-in-the-override.json"); err != nil {
			t.Fatalf("the override folder was not used: %v", err)
		}
	})
	t.Run("a folder without schemas", func(t *testing.T) {
		_, err := fromEnv(env(t.TempDir()))
		if err == nil || !strings.Contains(err.Error(), EnvOverride) {
			t.Fatalf("err = %v, want one naming %s", err, EnvOverride)
		}
	})
}

func allFiles(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	var out []string
	if err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

package adcpschemas

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
)

// TestPackMatchesProvenance recomputes, from each pack, the file count and the tree digest that
// scripts/vendor-adcp-schemas.sh wrote into PROVENANCE.md under the pack's heading (sha256 over
// sha256sum's lines for every file, sorted by path), so a pack replaced or edited by hand fails
// here. That each packed file equals its upstream copy is `make vendor-check`'s job: the
// folders are not part of the repository.
func TestPackMatchesProvenance(t *testing.T) {
	provenance, err := os.ReadFile("PROVENANCE.md")
	if err != nil {
		t.Fatal(err)
	}
	doubles, err := os.ReadFile("../adcptest/schemas-3.2.3.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	for heading, open := range map[string]func() (fs.FS, error){
		"3.1.19":         func() (fs.FS, error) { return Embedded(Release31) },
		"3.2.3-requests": func() (fs.FS, error) { return Embedded(Release32) },
		"3.2.3-buyer":    func() (fs.FS, error) { return Unpack(doubles) },
	} {
		t.Run(heading, func(t *testing.T) {
			_, section, ok := strings.Cut(string(provenance), "\n## "+heading+"\n")
			if !ok {
				t.Fatalf("PROVENANCE.md has no section ## %s", heading)
			}
			section, _, _ = strings.Cut(section, "\n## ")
			wantFiles := regexp.MustCompile(`(?m)^- files: (\d+)$`).FindStringSubmatch(section)
			wantDigest := regexp.MustCompile(`(?m)^- tree digest [^:]*: ([0-9a-f]{64})$`).FindStringSubmatch(section)
			if wantFiles == nil || wantDigest == nil {
				t.Fatalf("PROVENANCE.md names no file count or tree digest for %s:\n%s", heading, section)
			}
			pack, err := open()
			if err != nil {
				t.Fatal(err)
			}
			paths := allFiles(t, pack)
			if got := fmt.Sprint(len(paths)); got != wantFiles[1] {
				t.Errorf("the pack holds %s files, PROVENANCE.md says %s", got, wantFiles[1])
			}
			if got := treeDigest(t, pack, paths); got != wantDigest[1] {
				t.Errorf("the pack's tree digest is %s, PROVENANCE.md says %s", got, wantDigest[1])
			}
		})
	}
	if _, err := Embedded("9.9.9"); err == nil {
		t.Error("a release that is not embedded opened")
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

// Every tool's request schema compiles in each embedded release, and each release refuses what
// it refuses: a 3.1 check_governance without plan_id, which 3.2 no longer needs.
func TestEmbeddedSchemasValidate(t *testing.T) {
	v := adcpvalidate.NewReleasesValidator(Open)
	for _, version := range []string{"3.1", "3.2"} {
		if err := v.Precompile(version); err != nil {
			t.Fatalf("AdCP %s: %v", version, err)
		}
		if err := v.ValidateRequestAt(version, "create_media_buy", []byte(`{"idempotency_key":"short"}`)); err == nil {
			t.Fatalf("AdCP %s: an invalid create_media_buy passed the embedded schemas", version)
		}
	}
	// 3.2 names the agent a checked call goes to (target_agent); 3.1 has no such field.
	check := []byte(`{"adcp_version":"3.1","plan_id":"plan-1","caller":"https://buyer.example",
		"tool":"create_media_buy","payload":{}}`)
	if err := v.ValidateRequestAt("3.1", "check_governance", check); err != nil {
		t.Errorf("3.1 refused a 3.1 check_governance: %v", err)
	}
	var ve *adcp.ValidationError
	if err := v.ValidateRequestAt("3.2", "check_governance", check); !errors.As(err, &ve) || ve.Pointer != "/target_agent" {
		t.Errorf("3.2 took a check_governance without target_agent: %v", err)
	}
	if err := v.ValidateRequestAt("3.2", "list_tasks", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "no request schema") {
		t.Errorf("a 3.2 list_tasks, which the 3.2.3 subset does not carry, was not refused: %v", err)
	}
}

func TestOverride(t *testing.T) {
	pack, err := Embedded(Release31)
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

package adcpschemas

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
)

// TestVendoredCopyMatchesShared fails when ../shared/adcp-schemas changed and the vendored copy
// was not refreshed with scripts/vendor-adcp-schemas.sh.
func TestVendoredCopyMatchesShared(t *testing.T) {
	src, err := adcp.SchemaDir()
	if err != nil {
		t.Fatalf("locate ../shared/adcp-schemas: %v", err)
	}
	shared := os.DirFS(src)
	vendored, err := FS()
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	err = fs.WalkDir(shared, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		count++
		want, err := fs.ReadFile(shared, path)
		if err != nil {
			return err
		}
		got, err := fs.ReadFile(vendored, path)
		if err != nil {
			t.Errorf("%s missing from the vendored copy", path)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s", path, filepath.Join(src, path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(mustGlobAll(t, vendored)); n != count {
		t.Errorf("the pack holds %d files, the source %d", n, count)
	}
	if count < 300 {
		t.Fatalf("only %d shared schema files found", count)
	}
}

func TestEmbeddedSchemasValidate(t *testing.T) {
	schemas, err := FS()
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

func mustGlobAll(t *testing.T, fsys fs.FS) []string {
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

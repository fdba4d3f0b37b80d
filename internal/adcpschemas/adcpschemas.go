// Package adcpschemas embeds the AdCP JSON Schema releases buyflow validates every outbound
// request against, so that a deployed Lambda, the tests and the local stack carry them and
// read nothing outside the repository: 3.1.19 whole, and of 3.2.3 the closure under $ref of
// the request schemas buyflow sends (the simulated agents embed the whole 3.2.3 buyer subset
// themselves; a Lambda validates no answer, and the rest would cost every bootstrap 400 KB of
// its 12 MB). Each schemas-<release>.tar.gz is a verbatim, reproducible pack of upstream files
// made by scripts/vendor-adcp-schemas.sh; PROVENANCE.md records each pack's file count and
// tree digest, which a test checks against the pack, and `make vendor-check` compares every
// packed file with its upstream copy where the folders are at hand.
package adcpschemas

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing/fstest"
	"time"
)

// The releases embedded here, by name. Release31 is the one FS serves.
const (
	Release31 = "3.1.19"
	Release32 = "3.2.3"
)

// Releases lists the embedded releases, oldest first.
var Releases = []string{Release31, Release32}

//go:embed schemas-*.tar.gz
var packs embed.FS

type unpacked struct {
	once sync.Once
	fsys fs.FS
	err  error
}

var trees = map[string]*unpacked{Release31: {}, Release32: {}}

// EnvOverride names the environment variable that points FS at a 3.1 schema folder on disk
// instead of the embedded pack (to try a newer schema release before vendoring it).
const EnvOverride = "BUYFLOW_ADCP_SCHEMAS"

// FS returns the 3.1.19 schema tree every 3.1 validator uses, rooted at the schema root (core/,
// enums/, media-buy/, …): the folder named by $BUYFLOW_ADCP_SCHEMAS when it is set, else the
// embedded pack.
func FS() (fs.FS, error) { return fromEnv(os.Getenv) }

// Open returns release's schema tree: FS for 3.1.19 (so the override holds), the embedded pack
// for any other release. It is what adcpvalidate.NewReleasesValidator calls.
func Open(release string) (fs.FS, error) {
	if release == Release31 {
		return FS()
	}
	return Embedded(release)
}

func fromEnv(getenv func(string) string) (fs.FS, error) {
	dir := getenv(EnvOverride)
	if dir == "" {
		return Embedded(Release31)
	}
	if _, err := os.Stat(filepath.Join(dir, "enums", "error-code.json")); err != nil {
		return nil, fmt.Errorf("adcpschemas: %s=%q is not an AdCP schema folder: %w", EnvOverride, dir, err)
	}
	return os.DirFS(dir), nil
}

// Embedded returns release's embedded pack, unpacked in memory on first use, whatever the
// environment says.
func Embedded(release string) (fs.FS, error) {
	t, ok := trees[release]
	if !ok {
		return nil, fmt.Errorf("adcpschemas: no AdCP %s schemas are embedded (only %v)", release, Releases)
	}
	t.once.Do(func() {
		data, err := packs.ReadFile("schemas-" + release + ".tar.gz")
		if err != nil {
			t.err = fmt.Errorf("adcpschemas: %w", err)
			return
		}
		t.fsys, t.err = Unpack(data)
	})
	return t.fsys, t.err
}

// Unpack reads a pack made by scripts/vendor-adcp-schemas.sh into memory.
func Unpack(data []byte) (fs.FS, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("adcpschemas: open pack: %w", err)
	}
	files := fstest.MapFS{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("adcpschemas: read pack: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("adcpschemas: read %s: %w", h.Name, err)
		}
		files[h.Name] = &fstest.MapFile{Data: body, Mode: 0o444, ModTime: time.Unix(0, 0)}
	}
	if len(files) == 0 {
		return nil, errors.New("adcpschemas: the pack is empty")
	}
	return files, nil
}

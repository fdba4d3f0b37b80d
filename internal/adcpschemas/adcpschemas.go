// Package adcpschemas embeds the AdCP 3.1.19 JSON Schemas that buyflow validates every outbound
// request against, so that a deployed Lambda, the tests and the local stack carry them and read
// nothing outside the repository. schemas.tar.gz is a verbatim, reproducible pack of the upstream
// schema release made by scripts/vendor-adcp-schemas.sh; PROVENANCE.md records its file count and
// tree digest, which a test checks against the pack, and `make vendor-check` compares the pack
// with the upstream folder where one is at hand.
package adcpschemas

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "embed"
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

//go:embed schemas.tar.gz
var packed []byte

var (
	once     sync.Once
	unpacked fs.FS
	err      error
)

// EnvOverride names the environment variable that points FS at a schema folder on disk instead
// of the embedded pack (to try a newer schema release before vendoring it).
const EnvOverride = "BUYFLOW_ADCP_SCHEMAS"

// FS returns the schema tree every validator uses, rooted at the schema root (core/, enums/,
// media-buy/, …): the folder named by $BUYFLOW_ADCP_SCHEMAS when it is set, else the embedded
// pack.
func FS() (fs.FS, error) { return fromEnv(os.Getenv) }

func fromEnv(getenv func(string) string) (fs.FS, error) {
	dir := getenv(EnvOverride)
	if dir == "" {
		return Embedded()
	}
	if _, err := os.Stat(filepath.Join(dir, "enums", "error-code.json")); err != nil {
		return nil, fmt.Errorf("adcpschemas: %s=%q is not an AdCP schema folder: %w", EnvOverride, dir, err)
	}
	return os.DirFS(dir), nil
}

// Embedded returns the embedded pack, unpacked in memory on first use, whatever the environment
// says.
func Embedded() (fs.FS, error) {
	once.Do(func() { unpacked, err = unpack(packed) })
	return unpacked, err
}

func unpack(data []byte) (fs.FS, error) {
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

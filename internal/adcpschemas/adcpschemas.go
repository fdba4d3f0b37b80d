// Package adcpschemas embeds the AdCP 3.1.19 JSON Schemas that buyflow validates every outbound
// request against, so that a deployed Lambda carries them. schemas.tar.gz is a verbatim,
// reproducible pack of ../shared/adcp-schemas made by scripts/vendor-adcp-schemas.sh (see
// PROVENANCE.md); a test fails while the pack and its source differ.
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
	"sync"
	"testing/fstest"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
)

//go:embed schemas.tar.gz
var packed []byte

var (
	once     sync.Once
	unpacked fs.FS
	err      error
)

// FS returns the schema tree rooted at the schema root (core/, media-buy/, …), unpacked in
// memory on first use.
func FS() (fs.FS, error) {
	once.Do(func() { unpacked, err = unpack(packed) })
	return unpacked, err
}

// Validator returns a validator over the embedded schemas that unpacks them on its first
// validation: unpacking costs ~15 ms of CPU, which a function's cold start does not pay.
func Validator() *adcp.Validator { return adcp.NewLazyValidator(FS) }

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

// Package adcpschemas embeds the AdCP 3.1.19 JSON Schemas that buyflow validates every outbound
// request against, so that a deployed Lambda carries them. The files are a verbatim copy of
// ../shared/adcp-schemas made by scripts/vendor-adcp-schemas.sh (see PROVENANCE.md); a test
// fails while the copy and its source differ.
package adcpschemas

import (
	"embed"
	"io/fs"
)

//go:embed all:schemas
var files embed.FS

// FS returns the schema tree, rooted at the schema root (core/, media-buy/, …).
func FS() fs.FS {
	sub, err := fs.Sub(files, "schemas")
	if err != nil {
		panic(err) // the embedded directory is fixed at build time
	}
	return sub
}

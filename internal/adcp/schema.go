package adcp

import (
	"fmt"
	"maps"
	"slices"
)

// schemaReleases maps each AdCP wire version buyflow speaks to the schema release its requests
// are validated against.
var schemaReleases = map[string]string{
	WireVersion: "3.1.19",
	"3.2":       "3.2.3",
}

// RequestValidator checks a request before the client sends it: body, the exact arguments
// object for tool, against the tool's request schema in AdCP wire version ("3.1", "3.2"). A
// refusal is a *ValidationError. It is an interface, implemented by internal/adcpvalidate, so
// that a binary which never calls an agent does not link the JSON Schema library (whose init
// compiles every draft's metaschema, milliseconds of every cold start).
type RequestValidator interface {
	ValidateRequestAt(version, tool string, body []byte) error
}

// ValidationError reports a request that breaks the AdCP schema. It is
// returned before anything is sent.
type ValidationError struct {
	Tool    string  // MCP tool the request was for
	Schema  string  // schema file, relative to the schema root
	Pointer string  // JSON pointer of the first offending field, e.g. "/idempotency_key"
	Reason  string  // what is wrong there
	Issues  []Issue // every leaf violation, Pointer order
}

// Issue is one schema violation.
type Issue struct {
	Pointer string // RFC 6901 pointer into the request
	Reason  string
}

// Error names the offending field.
func (e *ValidationError) Error() string {
	s := fmt.Sprintf("adcp: %s request invalid at %s: %s", e.Tool, pointerOrRoot(e.Pointer), e.Reason)
	if n := len(e.Issues); n > 1 {
		s += fmt.Sprintf(" (and %d more)", n-1)
	}
	return s
}

// FieldPointer returns the JSON pointer of the first offending field ("" for the root).
func (e *ValidationError) FieldPointer() string { return e.Pointer }

func pointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// SchemaRelease returns the schema release requests in wire version are validated against
// ("3.1" → "3.1.19").
func SchemaRelease(version string) (string, error) {
	release, ok := schemaReleases[version]
	if !ok {
		return "", fmt.Errorf("adcp: no schema release for AdCP %s", version)
	}
	return release, nil
}

// SchemaReleases returns every schema release buyflow validates against, sorted.
func SchemaReleases() []string {
	return slices.Sorted(maps.Values(schemaReleases))
}

// RequestSchema returns where tool's request schema is for a request sent in wire version:
// the release and the schema file relative to its root. An empty path with no error means no
// release ships the tool's request schema (the request is sent unchecked); a tool the
// version's release does not carry is an error, not a pass: buyflow sends nothing it cannot
// check.
func RequestSchema(version, tool string) (release, path string, err error) {
	t, ok := tools[tool]
	if !ok {
		return "", "", fmt.Errorf("adcp: no request schema known for tool %q", tool)
	}
	if release, err = SchemaRelease(version); err != nil {
		return "", "", err
	}
	path = t.schemaIn(version)
	if path == "" && t.schema != "" {
		return "", "", fmt.Errorf("adcp: the AdCP %s schemas buyflow carries have no request schema for %s", release, tool)
	}
	return release, path, nil
}

// RequestSchemas returns wire version's release and the request schema file of every tool
// whose request schema that release carries, by tool.
func RequestSchemas(version string) (release string, paths map[string]string, err error) {
	if release, err = SchemaRelease(version); err != nil {
		return "", nil, err
	}
	paths = map[string]string{}
	for name, t := range tools {
		if rel := t.schemaIn(version); rel != "" {
			paths[name] = rel
		}
	}
	return release, paths, nil
}

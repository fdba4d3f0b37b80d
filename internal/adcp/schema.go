package adcp

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaVersion is the AdCP schema release requests are validated against.
const schemaVersion = "3.1.19"

// schemaBase is the absolute URL the schema files are registered under. The
// files' own $id values are "/schemas/3.1.19/<path>", which resolve against it.
const schemaBase = "https://adcp.invalid/schemas/" + schemaVersion + "/"

// ValidationError reports a request that breaks the AdCP schema. It is
// returned before anything is sent.
type ValidationError struct {
	Tool    string  // MCP tool the request was for
	Schema  string  // schema file, relative to the schema root
	Pointer string  // JSON pointer of the first offending field, e.g. "/idempotency_key"
	Reason  string  // what is wrong there
	Issues  []issue // every leaf violation, Pointer order
}

// issue is one schema violation.
type issue struct {
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

// Validator validates outbound requests against the AdCP JSON Schemas with
// format assertion on. Schemas compile on first use and are cached; a
// Validator is safe for concurrent use.
type Validator struct {
	open func() (fs.FS, error)

	mu       sync.Mutex
	compiler *jsonschema.Compiler // nil until the first compile
	compiled map[string]*jsonschema.Schema
}

// NewValidator returns a Validator reading schema files from fsys, whose root
// is the schema release directory (it holds core/, enums/, media-buy/, ...).
// Pass os.DirFS(dir) or an embed.FS sub-tree.
func NewValidator(fsys fs.FS) (*Validator, error) {
	if err := checkSchemaFS(fsys); err != nil {
		return nil, err
	}
	return NewLazyValidator(func() (fs.FS, error) { return fsys, nil }), nil
}

// NewLazyValidator returns a Validator that calls open on its first
// validation, not now: a Lambda whose schemas are an embedded archive does
// not unpack it on its cold path (most invocations validate nothing). An
// error from open, or a tree that is not a schema release, is the error of
// every validation.
func NewLazyValidator(open func() (fs.FS, error)) *Validator {
	return &Validator{open: open, compiled: map[string]*jsonschema.Schema{}}
}

func checkSchemaFS(fsys fs.FS) error {
	if _, err := fs.Stat(fsys, "enums/error-code.json"); err != nil {
		return fmt.Errorf("adcp: schema fs has no enums/error-code.json: %w", err)
	}
	return nil
}

// compilerLocked opens the schema tree once; v.mu is held.
func (v *Validator) compilerLocked() (*jsonschema.Compiler, error) {
	if v.compiler != nil {
		return v.compiler, nil
	}
	fsys, err := v.open()
	if err != nil {
		return nil, fmt.Errorf("adcp: open schemas: %w", err)
	}
	if err := checkSchemaFS(fsys); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	c.UseLoader(fsLoader{fsys})
	v.compiler = c
	return c, nil
}

// schema compiles (once) and returns the schema at rel.
func (v *Validator) schema(rel string) (*jsonschema.Schema, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.compiled[rel]; ok {
		return s, nil
	}
	c, err := v.compilerLocked()
	if err != nil {
		return nil, err
	}
	s, err := c.Compile(schemaBase + rel)
	if err != nil {
		return nil, fmt.Errorf("adcp: compile schema %s: %w", rel, err)
	}
	v.compiled[rel] = s
	return s, nil
}

// Precompile compiles the request schemas of every known tool now. The
// functions do not call it (a cold start would pay ~70 ms of CPU for tools
// the invocation never calls); it proves that a schema release compiles.
func (v *Validator) Precompile() error {
	seen := map[string]bool{}
	for _, t := range tools {
		if t.schema == "" || seen[t.schema] {
			continue
		}
		seen[t.schema] = true
		if _, err := v.schema(t.schema); err != nil {
			return err
		}
	}
	return nil
}

// ValidateRequest validates body, the exact arguments object for tool, against
// the tool's request schema. It returns a *ValidationError naming the first
// offending field, or another error if the tool is unknown or the schema
// cannot be compiled.
func (v *Validator) ValidateRequest(tool string, body []byte) error {
	t, ok := tools[tool]
	if !ok {
		return fmt.Errorf("adcp: no request schema known for tool %q", tool)
	}
	if t.schema == "" {
		return nil
	}
	s, err := v.schema(t.schema)
	if err != nil {
		return err
	}
	if err := boundNumbers(tool, t.schema, body); err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return &ValidationError{Tool: tool, Schema: t.schema, Reason: "body is not JSON: " + err.Error(),
			Issues: []issue{{Reason: "body is not JSON"}}}
	}
	if _, ok := inst.(map[string]any); !ok {
		return &ValidationError{Tool: tool, Schema: t.schema, Reason: "arguments must be a JSON object",
			Issues: []issue{{Reason: "arguments must be a JSON object"}}}
	}
	err = validateRecovering(s, inst)
	if err == nil {
		return nil
	}
	var jve *jsonschema.ValidationError
	if !errors.As(err, &jve) {
		return fmt.Errorf("adcp: validate %s request: %w", tool, err)
	}
	issues := leafIssues(jve)
	ve := &ValidationError{Tool: tool, Schema: t.schema, Issues: issues}
	if len(issues) > 0 {
		ve.Pointer, ve.Reason = issues[0].Pointer, issues[0].Reason
	}
	return ve
}

var printer = message.NewPrinter(language.English)

// leafIssues flattens a validation error tree into its leaves, most specific
// (deepest pointer) first.
func leafIssues(root *jsonschema.ValidationError) []issue {
	var out []issue
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		p := jsonPointer(e.InstanceLocation)
		if req, ok := e.ErrorKind.(*kind.Required); ok && len(req.Missing) > 0 {
			p += "/" + escapePointer(req.Missing[0])
		}
		if dep, ok := e.ErrorKind.(*kind.Dependency); ok && len(dep.Missing) > 0 {
			p += "/" + escapePointer(dep.Missing[0])
		}
		out = append(out, issue{Pointer: p, Reason: e.ErrorKind.LocalizedString(printer)})
	}
	walk(root)
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i].Pointer, "/") > strings.Count(out[j].Pointer, "/")
	})
	return out
}

func jsonPointer(toks []string) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(escapePointer(t))
	}
	return b.String()
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// fsLoader serves schema URLs under schemaBase from an fs.FS.
type fsLoader struct{ fsys fs.FS }

func (l fsLoader) Load(url string) (any, error) {
	rel, ok := strings.CutPrefix(url, schemaBase)
	if !ok {
		return nil, fmt.Errorf("adcp: schema %s is outside %s", url, schemaBase)
	}
	rel = path.Clean(rel)
	f, err := l.fsys.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("adcp: open schema %s: %w", rel, err)
	}
	defer func() { _ = f.Close() }() // read-only; the document is fully read before Close
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("adcp: parse schema %s: %w", rel, err)
	}
	return doc, nil
}

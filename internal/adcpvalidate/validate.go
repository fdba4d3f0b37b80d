// Package adcpvalidate (internal/adcpvalidate) validates outbound AdCP requests against the
// JSON Schemas of the wire version each is sent in: the adcp.RequestValidator every AdCP client
// is given. It is apart from internal/adcp so that a binary which calls no agent (the webhook
// receiver, approve, notify, ...) does not link github.com/santhosh-tekuri/jsonschema, whose
// init compiles every draft's metaschema on each cold start whether anything validates or not.
package adcpvalidate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/ecmaregexp"
)

// schemaOrigin is where every AdCP schema release lives, and the one origin the validator
// serves schema files under: the release is the first path segment after it. The 3.2 files
// name their $id and every $ref absolutely ("https://adcontextprotocol.org/schemas/3.2.3/…");
// the 3.1.19 files use root-relative ones ("/schemas/3.1.19/…"), which resolve against the
// same origin. One loader therefore serves both forms, and a reference can never cross from
// one release into another unnoticed: it names its release.
const schemaOrigin = "https://adcontextprotocol.org/schemas/"

// releaseCheckFile is a file every schema release buyflow carries has (the 3.2.3 pack holds
// the buyer's closure only, without enums/error-code.json).
const releaseCheckFile = "media-buy/create-media-buy-request.json"

// Validator validates outbound requests against the AdCP JSON Schemas of the wire version
// each is sent in, with format assertion on. Schemas compile on first use and are cached; a
// Validator is safe for concurrent use.
type Validator struct {
	open func(release string) (fs.FS, error)

	mu       sync.Mutex
	compiler *jsonschema.Compiler // nil until the first compile
	trees    map[string]fs.FS     // release → its opened schema tree
	compiled map[string]*jsonschema.Schema
}

var _ adcp.RequestValidator = (*Validator)(nil)

// NewValidator returns a Validator reading the 3.1.19 schema files from fsys, whose root is the
// schema release directory (it holds core/, enums/, media-buy/, ...). Pass os.DirFS(dir) or an
// embed.FS sub-tree. It validates 3.1 requests only.
func NewValidator(fsys fs.FS) (*Validator, error) {
	if err := checkSchemaFS(fsys); err != nil {
		return nil, err
	}
	only, err := adcp.SchemaRelease(adcp.WireVersion)
	if err != nil {
		return nil, err
	}
	return NewReleasesValidator(func(release string) (fs.FS, error) {
		if release != only {
			return nil, fmt.Errorf("adcp: no %s schemas were given to this validator", release)
		}
		return fsys, nil
	}), nil
}

// NewReleasesValidator returns a Validator for every wire version adcp.SchemaRelease knows. It
// calls open on the first validation in a release, not now (a Lambda whose schemas are an
// embedded archive does not unpack it on its cold path: most invocations validate nothing),
// once per release, with the release's name ("3.1.19", "3.2.3"); open returns its schema tree.
// An error from open, or a tree that is not a schema release, is the error of every validation
// in that release.
func NewReleasesValidator(open func(release string) (fs.FS, error)) *Validator {
	return &Validator{open: open, trees: map[string]fs.FS{}, compiled: map[string]*jsonschema.Schema{}}
}

func checkSchemaFS(fsys fs.FS) error {
	if _, err := fs.Stat(fsys, releaseCheckFile); err != nil {
		return fmt.Errorf("adcp: schema fs has no %s: %w", releaseCheckFile, err)
	}
	return nil
}

// compilerLocked makes the compiler once; v.mu is held.
func (v *Validator) compilerLocked() *jsonschema.Compiler {
	if v.compiler == nil {
		v.compiler = jsonschema.NewCompiler()
		v.compiler.DefaultDraft(jsonschema.Draft7)
		v.compiler.AssertFormat()
		v.compiler.UseRegexpEngine(ecmaregexp.Compile) // the schemas' patterns are ECMA-262
		v.compiler.UseLoader(releaseLoader{v})
	}
	return v.compiler
}

// treeLocked opens release's schema tree once; v.mu is held (the compiler's loader runs inside
// Compile, under the same lock).
func (v *Validator) treeLocked(release string) (fs.FS, error) {
	if t, ok := v.trees[release]; ok {
		return t, nil
	}
	fsys, err := v.open(release)
	if err != nil {
		return nil, fmt.Errorf("adcp: open %s schemas: %w", release, err)
	}
	if err := checkSchemaFS(fsys); err != nil {
		return nil, fmt.Errorf("adcp: %s schemas: %w", release, err)
	}
	v.trees[release] = fsys
	return fsys, nil
}

// schema compiles (once) and returns the schema at rel in release.
func (v *Validator) schema(release, rel string) (*jsonschema.Schema, error) {
	url := schemaOrigin + release + "/" + rel
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.compiled[url]; ok {
		return s, nil
	}
	if _, err := v.treeLocked(release); err != nil {
		return nil, err
	}
	s, err := v.compilerLocked().Compile(url)
	if err != nil {
		return nil, fmt.Errorf("adcp: compile schema %s: %w", url, err)
	}
	v.compiled[url] = s
	return s, nil
}

// Precompile compiles the request schemas of every known tool in wire version's release now.
// The functions do not call it (a cold start would pay ~70 ms of CPU for tools the invocation
// never calls); it proves that a schema release compiles.
func (v *Validator) Precompile(version string) error {
	release, paths, err := adcp.RequestSchemas(version)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for name, rel := range paths {
		if seen[rel] {
			continue
		}
		seen[rel] = true
		if _, err := v.schema(release, rel); err != nil {
			return fmt.Errorf("adcp: %s: %w", name, err)
		}
	}
	return nil
}

// ValidateRequest validates body, the exact arguments object for tool, against the tool's
// AdCP 3.1 request schema. It returns a *adcp.ValidationError naming the first offending field,
// or another error if the tool is unknown or the schema cannot be compiled.
func (v *Validator) ValidateRequest(tool string, body []byte) error {
	return v.ValidateRequestAt(adcp.WireVersion, tool, body)
}

// ValidateRequestAt is ValidateRequest for a request sent in AdCP wire version ("3.1",
// "3.2"). A tool whose request schema the version's release does not carry is an error, not a
// pass: buyflow sends nothing it cannot check.
func (v *Validator) ValidateRequestAt(version, tool string, body []byte) error {
	release, rel, err := adcp.RequestSchema(version, tool)
	if err != nil {
		return err
	}
	if rel == "" {
		return nil // no release ships this tool's request schema (see adcp's tools table)
	}
	s, err := v.schema(release, rel)
	if err != nil {
		return err
	}
	if err := boundNumbers(tool, rel, body); err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return &adcp.ValidationError{Tool: tool, Schema: rel, Reason: "body is not JSON: " + err.Error(),
			Issues: []adcp.Issue{{Reason: "body is not JSON"}}}
	}
	if _, ok := inst.(map[string]any); !ok {
		return &adcp.ValidationError{Tool: tool, Schema: rel, Reason: "arguments must be a JSON object",
			Issues: []adcp.Issue{{Reason: "arguments must be a JSON object"}}}
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
	ve := &adcp.ValidationError{Tool: tool, Schema: rel, Issues: issues}
	if len(issues) > 0 {
		ve.Pointer, ve.Reason = issues[0].Pointer, issues[0].Reason
	}
	return ve
}

// ValidateIntent checks an intent's body against its task's request schema,
// so a caller can refuse to store an intent that could never be sent.
func (v *Validator) ValidateIntent(in adcp.Intent) error {
	version, err := in.RequestVersion()
	if err != nil {
		return err
	}
	return v.ValidateRequestAt(version, in.Task, in.Body)
}

var printer = message.NewPrinter(language.English)

// leafIssues flattens a validation error tree into its leaves, most specific
// (deepest pointer) first.
func leafIssues(root *jsonschema.ValidationError) []adcp.Issue {
	var out []adcp.Issue
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
		out = append(out, adcp.Issue{Pointer: p, Reason: e.ErrorKind.LocalizedString(printer)})
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

// releaseLoader serves schema URLs under schemaOrigin from the tree of the release their first
// path segment names; it runs inside Compile, with the validator's lock held.
type releaseLoader struct{ v *Validator }

func (l releaseLoader) Load(url string) (any, error) {
	rest, ok := strings.CutPrefix(url, schemaOrigin)
	if !ok {
		return nil, fmt.Errorf("adcp: schema %s is outside %s", url, schemaOrigin)
	}
	release, rel, ok := strings.Cut(rest, "/")
	if !ok || !slices.Contains(adcp.SchemaReleases(), release) {
		return nil, fmt.Errorf("adcp: schema %s names no release buyflow carries", url)
	}
	fsys, err := l.v.treeLocked(release)
	if err != nil {
		return nil, err
	}
	rel = path.Clean(rel)
	f, err := fsys.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("adcp: open schema %s: %w", url, err)
	}
	defer func() { _ = f.Close() }() // read-only; the document is fully read before Close
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("adcp: parse schema %s: %w", url, err)
	}
	return doc, nil
}

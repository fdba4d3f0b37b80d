package adcptest

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/ecmaregexp"
	"github.com/buyflow/buyflow/internal/jsonnum"
)

// schemaBase is the made-up origin under which the schema files are
// registered. Every $id and $ref in the 3.1.19 set is an absolute path of the
// form /schemas/3.1.19/<rel>, so it resolves against this origin.
const schemaBase = "https://adcp.schemas.invalid/schemas/3.1.19/"

// schemaBase32 is where the 3.2.3 files live: each names its $id and every $ref absolutely
// under it, so they are registered there as they are.
const schemaBase32 = "https://adcontextprotocol.org/schemas/" + adcpschemas.Release32 + "/"

// requestSchemas maps each tool the agents serve to its request schema.
var requestSchemas = map[string]string{
	"get_adcp_capabilities": "protocol/get-adcp-capabilities-request.json",
	"create_media_buy":      "media-buy/create-media-buy-request.json",
	"update_media_buy":      "media-buy/update-media-buy-request.json",
	"get_media_buys":        "media-buy/get-media-buys-request.json",
	"get_task_status":       "protocol/get-task-status-request.json",
	"tasks/get":             "core/tasks-get-request.json",
	"list_tasks":            "protocol/list-tasks-request.json",
	"tasks/list":            "core/tasks-list-request.json",
	"check_governance":      "governance/check-governance-request.json",
	"report_plan_outcome":   "governance/report-plan-outcome-request.json",
	"sync_plans":            "governance/sync-plans-request.json",
	"get_plan_audit_logs":   "governance/get-plan-audit-logs-request.json",
}

// Validator validates AdCP payloads against the JSON Schemas with format
// assertion on. It is safe for concurrent use.
type Validator struct {
	base     string // the origin the schema files are registered under
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

var (
	validatorsMu sync.Mutex
	validators   = map[string]*Validator{}
)

// NewValidator returns the (process-wide, cached) validator for the schema
// folder dir. An empty dir means the schemas the functions use
// (adcpschemas.FS: the embedded copy, unless $BUYFLOW_ADCP_SCHEMAS names a folder).
func NewValidator(dir string) (*Validator, error) {
	key := dir
	if dir == "" {
		key = "env:" + os.Getenv(adcpschemas.EnvOverride)
	}
	validatorsMu.Lock()
	defer validatorsMu.Unlock()
	if v, ok := validators[key]; ok {
		return v, nil
	}
	fsys := os.DirFS(dir)
	if dir == "" {
		var err error
		if fsys, err = adcpschemas.FS(); err != nil {
			return nil, err
		}
	}
	v, err := newValidator(fsys, schemaBase, key)
	if err != nil {
		return nil, err
	}
	validators[key] = v
	return v, nil
}

// buyer32 is the whole AdCP 3.2.3 buyer subset (requests and the answers a buyer reads), made
// by scripts/vendor-adcp-schemas.sh with its provenance in internal/adcpschemas/PROVENANCE.md.
// The Lambdas embed only the requests' closure (adcpschemas); an agent checks its answers too.
//
//go:embed schemas-3.2.3.tar.gz
var buyer32 []byte

// NewValidator32 returns the (process-wide, cached) validator of the AdCP 3.2.3 buyer subset:
// what an agent in Version32 mode checks requests and its own answers with.
func NewValidator32() (*Validator, error) {
	key := "release:" + adcpschemas.Release32
	validatorsMu.Lock()
	defer validatorsMu.Unlock()
	if v, ok := validators[key]; ok {
		return v, nil
	}
	fsys, err := adcpschemas.Unpack(buyer32)
	if err != nil {
		return nil, err
	}
	v, err := newValidator(fsys, schemaBase32, key)
	if err != nil {
		return nil, err
	}
	validators[key] = v
	return v, nil
}

// newValidator registers every schema file of fsys under base.
func newValidator(fsys fs.FS, base, key string) (*Validator, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseRegexpEngine(ecmaregexp.Compile)
	n := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		n++
		return c.AddResource(base+p, doc)
	})
	if err != nil {
		return nil, fmt.Errorf("load adcp schemas (%s): %w", key, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("load adcp schemas: no .json files in %s", key)
	}
	return &Validator{base: base, compiler: c, compiled: map[string]*jsonschema.Schema{}}, nil
}

func (v *Validator) schema(rel string) (*jsonschema.Schema, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.compiled[rel]; ok {
		return s, nil
	}
	s, err := v.compiler.Compile(v.base + rel)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", rel, err)
	}
	v.compiled[rel] = s
	return s, nil
}

// Validate checks raw JSON against the schema at rel (a path below the schema
// directory, e.g. "media-buy/create-media-buy-request.json"). A schema
// violation is returned as *SchemaError.
func (v *Validator) Validate(rel string, raw []byte) error {
	s, err := v.schema(rel)
	if err != nil {
		return err
	}
	// The schema library panics on numbers math/big refuses (see internal/jsonnum).
	if err := jsonnum.Check(raw); err != nil {
		return &SchemaError{Schema: rel, Message: "body has a number out of bounds or is not JSON: " + err.Error()}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &SchemaError{Schema: rel, Message: "body is not valid JSON: " + err.Error()}
	}
	if err := s.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return newSchemaError(rel, ve)
		}
		return err
	}
	return nil
}

// ValidateRequest validates the arguments of a call to tool against the
// tool's request schema. Tools without a known schema pass.
func (v *Validator) ValidateRequest(tool string, raw []byte) error {
	rel, ok := requestSchemas[tool]
	if !ok {
		return nil
	}
	return v.Validate(rel, raw)
}

// schemaIssue is one leaf schema violation.
type schemaIssue struct {
	// Pointer is the RFC 6901 pointer of the offending value.
	Pointer string `json:"pointer"`
	// Message says what is wrong.
	Message string `json:"message"`
	// Keyword is the JSON Schema keyword that failed.
	Keyword string `json:"keyword"`
}

// SchemaError reports a payload that its schema rejects.
type SchemaError struct {
	// Schema is the schema path below the schema directory.
	Schema string
	// Field is the first issue's location in JSONPath-lite form
	// ("packages[0].budget"), as core/error.json's field wants it.
	Field string
	// Message summarises the first issue.
	Message string
	// Issues lists every leaf violation, most specific first.
	Issues []schemaIssue
}

func (e *SchemaError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Schema, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Schema, e.Message)
}

func newSchemaError(rel string, ve *jsonschema.ValidationError) *SchemaError {
	var leaves []*jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	se := &SchemaError{Schema: rel}
	for _, l := range leaves {
		loc := append([]string(nil), l.InstanceLocation...)
		msg := l.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		if r, ok := l.ErrorKind.(*kind.Required); ok && len(r.Missing) > 0 {
			loc = append(loc, r.Missing[0])
		}
		kw := ""
		if kp := l.ErrorKind.KeywordPath(); len(kp) > 0 {
			kw = kp[len(kp)-1]
		}
		se.Issues = append(se.Issues, schemaIssue{Pointer: pointer(loc), Message: msg, Keyword: kw})
	}
	// Deepest location first: it names the field most precisely.
	sort.SliceStable(se.Issues, func(i, j int) bool {
		return strings.Count(se.Issues[i].Pointer, "/") > strings.Count(se.Issues[j].Pointer, "/")
	})
	if len(se.Issues) > 0 {
		se.Field = jsonPathLite(se.Issues[0].Pointer)
		se.Message = se.Issues[0].Message
	} else {
		se.Message = ve.Error()
	}
	return se
}

func pointer(loc []string) string {
	if len(loc) == 0 {
		return ""
	}
	var b strings.Builder
	for _, s := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// jsonPathLite turns "/packages/0/budget" into "packages[0].budget".
func jsonPathLite(ptr string) string {
	if ptr == "" {
		return ""
	}
	var b strings.Builder
	for _, seg := range strings.Split(ptr[1:], "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		if _, err := strconv.Atoi(seg); err == nil {
			b.WriteString("[" + seg + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

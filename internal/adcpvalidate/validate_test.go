package adcpvalidate

import (
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
)

// embeddedOnce validates both embedded releases, as the functions' validator does.
var embeddedOnce = sync.OnceValue(func() *Validator { return NewReleasesValidator(adcpschemas.Open) })

func embedded(t *testing.T) *Validator {
	t.Helper()
	return embeddedOnce()
}

func mustIntent(t *testing.T, task string, req any, at time.Time) adcp.Intent {
	t.Helper()
	in, err := adcp.NewIntent(task, req, at)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func validCreate() adcp.CreateMediaBuyRequest {
	return adcp.CreateMediaBuyRequest{
		Account:   adcp.AccountRef{AccountID: "acc_1"},
		Brand:     adcp.BrandRef{Domain: "acme.example"},
		StartTime: "asap",
		EndTime:   "2030-01-31T23:59:59Z",
		Packages:  []adcp.PackageRequest{{ProductID: "prod_1", PricingOptionID: "cpm_1", Budget: "5000"}},
	}
}

// TestValidatorFromFS shows the loader works from any fs.FS (embedding).
func TestValidatorFromFS(t *testing.T) {
	fsys := fstest.MapFS{
		releaseCheckFile: {Data: []byte(`{"type":"object"}`)},
		"core/tasks-get-request.json": {Data: []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","$id":"/schemas/3.1.19/core/tasks-get-request.json",
			"type":"object","required":["task_id"],"properties":{"task_id":{"type":"string"},"when":{"type":"string","format":"date-time"}},
			"allOf":[{"$ref":"/schemas/3.1.19/core/version-envelope.json"}]}`)},
		"core/version-envelope.json": {Data: []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","$id":"/schemas/3.1.19/core/version-envelope.json",
			"type":"object","properties":{"adcp_version":{"type":"string","pattern":"^\\d+\\.\\d+$"}}}`)},
	}
	v, err := NewValidator(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.ValidateRequest(adcp.ToolTasksGet, []byte(`{"task_id":"t","adcp_version":"3.1","when":"2030-01-01T00:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	var ve *adcp.ValidationError
	if err := v.ValidateRequest(adcp.ToolTasksGet, []byte(`{"task_id":"t","adcp_version":"three"}`)); !errors.As(err, &ve) || ve.Pointer != "/adcp_version" {
		t.Fatalf("got %v", err)
	}
	if err := v.ValidateRequest(adcp.ToolTasksGet, []byte(`{"task_id":"t","when":"yesterday"}`)); !errors.As(err, &ve) || ve.Pointer != "/when" {
		t.Fatalf("format not asserted: %v", err)
	}
	if _, err := NewValidator(fstest.MapFS{}); err == nil {
		t.Fatal("empty fs accepted")
	}
}

// TestLazyValidatorOpensOnFirstValidation: the schema tree is opened by the first validation,
// once, and a tree that cannot be opened fails validations instead of the constructor.
func TestLazyValidatorOpensOnFirstValidation(t *testing.T) {
	fsys := fstest.MapFS{
		releaseCheckFile: {Data: []byte(`{"type":"object"}`)},
		"core/tasks-get-request.json": {Data: []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","$id":"/schemas/3.1.19/core/tasks-get-request.json",
			"type":"object","required":["task_id"],"properties":{"task_id":{"type":"string"}}}`)},
	}
	opened := 0
	v := NewReleasesValidator(func(string) (fs.FS, error) { opened++; return fsys, nil })
	if opened != 0 {
		t.Fatal("opened at construction")
	}
	for range 2 {
		if err := v.ValidateRequest(adcp.ToolTasksGet, []byte(`{"task_id":"t"}`)); err != nil {
			t.Fatal(err)
		}
	}
	var ve *adcp.ValidationError
	if err := v.ValidateRequest(adcp.ToolTasksGet, []byte(`{}`)); !errors.As(err, &ve) {
		t.Fatalf("missing task_id: %v", err)
	}
	if opened != 1 {
		t.Fatalf("opened %d times, want once", opened)
	}
	broken := NewReleasesValidator(func(string) (fs.FS, error) { return nil, errors.New("pack corrupt") })
	if err := broken.ValidateRequest(adcp.ToolTasksGet, []byte(`{"task_id":"t"}`)); err == nil || !strings.Contains(err.Error(), "pack corrupt") {
		t.Fatalf("unopenable tree: %v", err)
	}
	empty := NewReleasesValidator(func(string) (fs.FS, error) { return fstest.MapFS{}, nil })
	if err := empty.ValidateRequest(adcp.ToolTasksGet, []byte(`{"task_id":"t"}`)); err == nil {
		t.Fatal("a tree without the schemas validated")
	}
}

func TestPrecompile(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every request schema")
	}
	start := time.Now()
	if err := embedded(t).Precompile(adcp.WireVersion); err != nil {
		t.Fatal(err)
	}
	t.Logf("precompiled in %v", time.Since(start))
}

func TestValidateIntent(t *testing.T) {
	v := embedded(t)
	good := mustIntent(t, adcp.ToolCreateMediaBuy, validCreate(), time.Now())
	if err := v.ValidateIntent(good); err != nil {
		t.Fatal(err)
	}
	r := validCreate()
	r.EndTime = ""
	var ve *adcp.ValidationError
	if err := v.ValidateIntent(mustIntent(t, adcp.ToolCreateMediaBuy, r, time.Now())); !errors.As(err, &ve) || ve.Pointer != "/end_time" {
		t.Fatalf("got %v", err)
	}
	if err := v.ValidateIntent(adcp.Intent{Task: adcp.ToolGetMediaBuys}); err == nil {
		t.Fatal("read task accepted")
	}
}

// TestValidateRecoveringSurvivesTheLibraryPanic hands the schema library the instance it
// panics on (the bound in ValidateRequest normally keeps it away) and expects an error.
func TestValidateRecoveringSurvivesTheLibraryPanic(t *testing.T) {
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"type":"number","minimum":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("n.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("n.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := validateRecovering(s, json.Number("1e10000000")); err == nil || !strings.Contains(err.Error(), "schema validator failed") {
		t.Fatalf("err = %v", err)
	}
	if err := validateRecovering(s, json.Number("5")); err != nil {
		t.Fatalf("a valid number: %v", err)
	}
}

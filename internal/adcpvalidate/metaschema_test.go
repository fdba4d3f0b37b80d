package adcpvalidate

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestSchemasAreCheckedAgainstTheirMetaschemaFromTheFirstCompile: third_party/jsonschema
// compiles the drafts' metaschemas on the first compile instead of at init. Compilers racing
// to be first (as the functions' tools compile on their first calls) each still check a schema
// against its draft's metaschema: a schema that breaks it is refused, a valid one compiles.
func TestSchemasAreCheckedAgainstTheirMetaschemaFromTheFirstCompile(t *testing.T) {
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() {
			c := jsonschema.NewCompiler()
			c.AssertFormat()
			bad := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"objekt"}`
			good := `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`
			for name, src := range map[string]string{"bad.json": bad, "good.json": good} {
				doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
				if err != nil {
					errs[i] = err
					return
				}
				if err := c.AddResource(name, doc); err != nil {
					errs[i] = err
					return
				}
			}
			if _, err := c.Compile("bad.json"); err == nil {
				errs[i] = errors.New(`a schema with type "objekt" compiled: no metaschema check`)
				return
			}
			_, errs[i] = c.Compile("good.json")
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("compiler %d: %v", i, err)
		}
	}
}

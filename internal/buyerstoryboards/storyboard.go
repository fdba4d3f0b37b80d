// Package buyerstoryboards (internal/buyerstoryboards) runs the AdCP buyer conformance
// storyboards (preview) against buyflow: it reads the storyboard YAML vendored in testdata/
// (with our corrections, see testdata/PROVENANCE.md), turns each storyboard's fixture into the
// simulated seller's scenarios (internal/adcptest), and grades the calls buyflow made with the
// storyboards' own check kinds (universal/buyer-fixture-publisher.yaml > buyer_check_kinds).
// TestStoryboards (runner_test.go) drives buyflow's governance, create and poll stages against
// that seller and holds the README's conformance table to the results; the orchestrator's
// partial-failure steps need the Campaign state machine and are graded by
// statemachine/stagepaths' TestOrchestratorStoryboard with this package's grading.
//
// Test support: no Lambda links it.
package buyerstoryboards

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Storyboard is one buyer storyboard, as much of it as the runner reads.
type Storyboard struct {
	ID       string `yaml:"id"`
	Title    string `yaml:"title"`
	Status   string `yaml:"status"`
	Fixtures struct {
		Publisher Fixture `yaml:"fixture_publisher"`
	} `yaml:"fixtures"`
	Phases []Phase `yaml:"phases"`
}

// Fixture is a storyboard's fixtures.fixture_publisher block.
type Fixture struct {
	Capabilities struct {
		MediaBuy struct {
			LifecycleTools []string `yaml:"lifecycle_tools"`
		} `yaml:"media_buy"`
		AdCP struct {
			SupportedVersions []string `yaml:"supported_versions"`
		} `yaml:"adcp"`
	} `yaml:"capabilities"`
	Scenarios      map[string]ScenarioDecl `yaml:"scenarios"`
	CampaignBudget float64                 `yaml:"campaign_budget"`
}

// ScenarioDecl is one declared scenario of a fixture.
type ScenarioDecl struct {
	ErrorCode       string  `yaml:"error_code"`
	HTTPStatus      int     `yaml:"http_status"`
	RetryAfter      float64 `yaml:"retry_after"`
	WWWAuthenticate string  `yaml:"www_authenticate"`
	Message         string  `yaml:"message"`
	ResponseType    string  `yaml:"response_type"`
	TaskID          string  `yaml:"task_id"`
	MediaBuyStatus  string  `yaml:"media_buy_status"`
}

// Phase is a group of steps.
type Phase struct {
	ID    string `yaml:"id"`
	Title string `yaml:"title"`
	Steps []Step `yaml:"steps"`
}

// Step is one graded step: the task the buyer is expected to call and the checks on it.
type Step struct {
	ID            string         `yaml:"id"`
	Title         string         `yaml:"title"`
	Task          string         `yaml:"task"`
	SampleRequest map[string]any `yaml:"sample_request"`
	Validations   []Validation   `yaml:"validations"`
}

// Validation is one check of a step, with the parameters its kind takes.
type Validation struct {
	Check        string  `yaml:"check"`
	Path         string  `yaml:"path"`
	Format       string  `yaml:"format"`
	Allowed      []any   `yaml:"allowed"`
	Value        any     `yaml:"value"`
	MinSeconds   float64 `yaml:"min_seconds"`
	ResponseType string  `yaml:"response_type"`
	Task         string  `yaml:"task"`
	Before       string  `yaml:"before"`
	Field        string  `yaml:"field"`
	Description  string  `yaml:"description"`
}

// KeyAlias is the alias of the sample request's generated idempotency key
// ("$generate:uuid_v4#<alias>"), "" when it has none. Two steps with one alias expect one key.
func (s Step) KeyAlias() string {
	v, _ := s.SampleRequest["idempotency_key"].(string)
	_, alias, ok := strings.Cut(v, "$generate:uuid_v4#")
	if !ok {
		return ""
	}
	return alias
}

// Contract is the fixture-publisher contract, as much of it as the runner reads.
type Contract struct {
	Version    string         `yaml:"version"`
	CheckKinds map[string]any `yaml:"buyer_check_kinds"`
}

// Parse reads one storyboard; a storyboard without an id, or with a step without an id or a
// check without a kind, is an error.
func Parse(b []byte) (*Storyboard, error) {
	var s Storyboard
	if err := yaml.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if s.ID == "" {
		return nil, fmt.Errorf("storyboard without id")
	}
	for _, p := range s.Phases {
		for _, st := range p.Steps {
			if st.ID == "" {
				return nil, fmt.Errorf("%s: phase %s has a step without id", s.ID, p.ID)
			}
			for i, v := range st.Validations {
				if v.Check == "" {
					return nil, fmt.Errorf("%s: step %s: validation %d has no check kind", s.ID, st.ID, i)
				}
			}
		}
	}
	return &s, nil
}

// Load reads the contract (universal/buyer-fixture-publisher.yaml) and every storyboard
// (specialisms/*/index.yaml) of fsys, sorted by id, and refuses a storyboard using a check kind
// the contract does not register or this package cannot grade.
func Load(fsys fs.FS) (*Contract, []*Storyboard, error) {
	raw, err := fs.ReadFile(fsys, "universal/buyer-fixture-publisher.yaml")
	if err != nil {
		return nil, nil, err
	}
	var c Contract
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return nil, nil, fmt.Errorf("contract: %w", err)
	}
	for kind := range c.CheckKinds {
		if !slices.Contains(CheckKinds, kind) {
			return nil, nil, fmt.Errorf("the contract registers check kind %q, which the runner cannot grade", kind)
		}
	}
	files, err := fs.Glob(fsys, "specialisms/*/index.yaml")
	if err != nil {
		return nil, nil, err
	}
	var out []*Storyboard
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, nil, err
		}
		s, err := Parse(b)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path.Dir(f), err)
		}
		for _, p := range s.Phases {
			for _, st := range p.Steps {
				for _, v := range st.Validations {
					if _, ok := c.CheckKinds[v.Check]; !ok || !slices.Contains(CheckKinds, v.Check) {
						return nil, nil, fmt.Errorf("%s: step %s: unknown check kind %q", s.ID, st.ID, v.Check)
					}
				}
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Storyboard) int { return strings.Compare(a.ID, b.ID) })
	return &c, out, nil
}
